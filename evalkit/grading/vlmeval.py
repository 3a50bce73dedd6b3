"""VLMEvalKit's answer readers, ported as pure functions (TDBench `--mode official`).

Sources (public, pinned):

* open-compass/VLMEvalKit@3ba9220a (the commit that added TDBench)
  - vlmeval/utils/matching_util.py: `can_infer`, `can_infer_option`, `can_infer_text`
  - vlmeval/dataset/utils/tdbench.py: `extract_bbox_from_string`, `calculate_bbox_iou`,
    `calculate_centroid_containment`
  - vlmeval/dataset/utils/multiple_choice.py: `build_prompt` / `build_prompt_cn` (the extractor
    prompt) with vlmeval/smp `build_option_str` and `cn_string`
* open-compass/VLMEvalKit@e8e78f0 vlmeval/utils/matching_util.py: the later `can_infer` (a letter only
  among the last four tokens, an "answer is X" pattern, a length cap on option-text matching),
  offered as the "latest" variant.

The return conventions differ from the Python originals only in spelling: a letter, "Z" (VLMEvalKit's
"no option": its refusal strings or a lone Z), or None where the original returns False.

VLMEvalKit keeps predictions in an xlsx file between inference and scoring (`dump`, then `load` with
pandas' `read_excel` and `data['prediction'] = [str(x) for x in ...]` in
vlmeval/dataset/image_mcq.py), so a reply that is one of pandas' default NA strings is read back as
"nan": `read_back` applies that round trip before any reader sees the reply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

Box = tuple[float, float, float, float]

#: the `can_infer` variants: the one TDBench's numbers were produced with, and the later one
PARSERS: tuple[str, ...] = ("3ba9220a", "latest")
NO_OPTION = "Z"

_API_FAILURE = "Failed to obtain answer via API"
# replies VLMEvalKit reads as "no option" before looking for letters (substring match, case as written)
_REJECTIONS = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_SEPARATORS = str.maketrans({c: " " for c in ".()[],:;!*#{}"})
# the later parser's chain-of-thought rule ("The correct answer is **B**"); case-insensitive on purpose
_ANSWER_IS = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")


#: pandas' default NA strings (`keep_default_na`): a cell equal to one of them, exactly and as a whole (no
#: stripping, case as written), is read back by `read_excel` as NaN, which `str()` turns into "nan".
PANDAS_NA: frozenset[str] = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
    "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})


def read_back(prediction: str) -> str:
    """The reply as VLMEvalKit's scoring reads it after its xlsx round trip: "nan" for a reply that is
    exactly one of pandas' NA strings (" None" or "none" stay as they are), else the reply unchanged."""
    return "nan" if prediction in PANDAS_NA else prediction


def _check(parser: str) -> None:
    if parser not in PARSERS:
        raise ValueError(f"unknown VLMEvalKit parser {parser!r} (expected one of {', '.join(PARSERS)})")


def tokens(answer: str) -> list[str]:
    """VLMEvalKit's tokenisation: the characters .()[],:;!*#{} become spaces, then split on whitespace."""
    return answer.translate(_SEPARATORS).split()


def can_infer_option(answer: str, choices: Mapping[str, str], parser: str = "3ba9220a") -> str | None:
    """The option letter standing alone as a token, when exactly one option letter does.

    A failed-API placeholder is None; VLMEvalKit's refusal strings, or no letter but a lone "Z"
    token, are "Z". VLMEvalKit's VERBOSE switch (off by default) is not modelled.
    """
    _check(parser)
    if _API_FAILURE in answer:
        return None
    if any(err in answer for err in _REJECTIONS):
        return NO_OPTION
    splits = tokens(answer)
    present = [c for c in choices if c in splits]
    if len(present) == 1:
        letter = present[0]
        if parser == "3ba9220a" or splits.index(letter) > len(splits) - 5:
            return letter
    elif not present and NO_OPTION in splits:
        return NO_OPTION
    if parser == "latest":
        m = _ANSWER_IS.search(answer)
        if m and m.group(1).upper() in choices:
            return m.group(1).upper()
    return None


def can_infer_text(answer: str, choices: Mapping[str, str], parser: str = "3ba9220a") -> str | None:
    """The option whose text (lower-cased) is contained in the answer, when exactly one is."""
    _check(parser)
    low = answer.lower()
    if parser == "latest" and len(low) > 2 * sum(len(str(v)) for v in choices.values()):
        return None
    hits = [k for k, v in choices.items() if str(v).lower() in low]
    return hits[0] if len(hits) == 1 else None


def can_infer(answer: str, choices: Mapping[str, str], parser: str = "3ba9220a") -> str | None:
    """VLMEvalKit's rule step for a multiple-choice answer: the letter rule, then the option-text rule.

    Returns a letter of `choices`, "Z" (no option), or None (not inferable: the extractor's turn).
    The answer is read as given: no `<think>` block is removed.
    """
    return can_infer_option(answer, choices, parser) or can_infer_text(answer, choices, parser)


# ---------------------------------------------------------------------------------------
# The extractor prompt (VLMEvalKit's `build_prompt`, English, or Chinese when the question has CJK)
# ---------------------------------------------------------------------------------------

_CJK = re.compile("[\u4e00-\u9fff]")

_JUDGE_EN = (
    "You are an AI assistant who will help me to match an answer with several options of a single-choice "
    "question. You are provided with a question, several options, and an answer, and you need to find which "
    "option is most similar to the answer. If the meaning of all options are significantly different from the "
    "answer, output Z. Your should output a single uppercase character in A, B, C, D (if they are valid options), "
    "and Z. \n"
    "Example 1: \n"
    "Question: What is the main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\n"
    "Answer: a cute teddy bear\nYour output: A\n"
    "Example 2: \n"
    "Question: What is the main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\n"
    "Answer: Spider\nYour output: Z\n"
    "Example 3: \n"
    "Question: {question}?\nOptions: {options}\nAnswer: {prediction}\nYour output: "
)
_JUDGE_CN = (
    "你是一个帮助我匹配答案与单选题中多个选项的 AI 助手。"
    "你会被提供：一个问题，多个选项，一个答案。你的任务是找到与答案意义最相近的选项。"
    "如果所有选项的意义都与答案显著不同，则输出 Z。"
    "你应该输出一个单个的大写字母，例如 A, B, C, D（如果它们是有效选项），或 Z。"
    "例 1:"
    "问题: 图中最主要的物体是什么?\n选项: A. 泰迪熊 B. 兔子 C. 猫 D. 狗\n答案: 一只可爱的泰迪熊\n输出: A\n"
    "例 2: \n"
    "问题: 图中最主要的物体是什么?\n选项: A. 泰迪熊 B. 兔子 C. 猫 D. 狗\n答案: 蜘蛛\n输出: Z\n"
    "例 3: \n"
    "问题: {question}?\n选项: {options}\n答案: {prediction}\n输出: "
)


def option_block(choices: Mapping[str, str]) -> str:
    """VLMEvalKit's `build_option_str`: a lead line, then "A. text" lines, each ending in a newline."""
    return "There are several options: \n" + "".join(f"{k}. {v}\n" for k, v in choices.items())


def judge_prompt(question: str, choices: Mapping[str, str], prediction: str) -> str:
    """The extractor prompt VLMEvalKit sends for an answer `can_infer` could not read.

    Filled in one pass, as str.format does, so braces in the question or answer stay as they are.
    """
    template = _JUDGE_CN if _CJK.search(question) else _JUDGE_EN
    values = {"question": question, "options": option_block(choices), "prediction": prediction}
    return re.sub(r"\{(question|options|prediction)\}", lambda m: values[m.group(1)], template)


# ---------------------------------------------------------------------------------------
# Boxes (TDBench grounding)
# ---------------------------------------------------------------------------------------

# each number: at most one digit before an optional decimal part ("0", "0.25", ".5", "1"); commas
# with at most one whitespace after them. Pixel values, bare spaces or labels do not fit.
_BOX = re.compile(r"(\d?(?:\.\d+)?),\s?(\d?(?:\.\d+)?),\s?(\d?(?:\.\d+)?),\s?(\d?(?:\.\d+)?)")


def extract_bbox(text: str) -> Box | None:
    """VLMEvalKit's `extract_bbox_from_string`: newlines removed, then exactly one `a, b, c, d` match.

    None where VLMEvalKit raises (no match, several matches, an empty number): it scores that 0.
    """
    found = _BOX.findall(text.replace("\n", ""))
    if len(found) != 1:
        return None
    try:
        a, b, c, d = (float(x) for x in found[0])
    except ValueError:
        return None
    return a, b, c, d


def bbox_iou(pred: Sequence[float], gold: Sequence[float]) -> float:
    """`calculate_bbox_iou` as VLMEvalKit computes it, corners taken as given (0 on a zero union)."""
    ix0, iy0 = max(pred[0], gold[0]), max(pred[1], gold[1])
    ix1, iy1 = min(pred[2], gold[2]), min(pred[3], gold[3])
    if ix1 < ix0 or iy1 < iy0:
        return 0.0
    inter = (ix1 - ix0) * (iy1 - iy0)
    union = (pred[2] - pred[0]) * (pred[3] - pred[1]) + (gold[2] - gold[0]) * (gold[3] - gold[1]) - inter
    return inter / union if union != 0 else 0.0


def centroid_inside(pred: Sequence[float], gold: Sequence[float]) -> bool:
    """`calculate_centroid_containment`: the predicted box's centre within the true box, edges included."""
    cx, cy = (pred[0] + pred[2]) / 2, (pred[1] + pred[3]) / 2
    return gold[0] <= cx <= gold[2] and gold[1] <= cy <= gold[3]
