"""IF-Bench judgment, pure: the official first-character rule after `</think>`, evalkit's robust
letter parser, the official extractor's prompt and how its reply is read, and the judgment counts
(casiatao/IF-Bench@fc784fc, evaluate/bench_evaluate.py and evaluate/qwen3_infer.py; docs/official-ifbench.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalkit.core.record import Parsed, Record
from evalkit.core.resources import read_prompt
from evalkit.grading.extract import is_refusal, parse_letter, strip_reasoning

LETTERS = ("A", "B", "C", "D")



def after_think(text: str | None) -> str:
    """Official clean-up: strip, keep what follows the last `</think>`, strip again."""
    text = (text or "").strip()
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


def official_rule(text: str | None, letters: Sequence[str] = LETTERS) -> Parsed:
    """First-character rule: "" is wrong, A-D is the answer, anything else goes to the extractor."""
    body = after_think(text)
    if not body:
        return Parsed("", "empty")  # an answer of nothing: scored wrong, never sent to a judge
    if body[0] in letters:
        return Parsed(body[0], "first_char")
    return Parsed(None, "unparsed")


def robust_rule(text: str | None, options: Mapping[str, str] | None = None) -> Parsed:
    """A proper letter parser first ("Answer: C" is C); refusals are counted apart."""
    body = after_think(text)
    if not body:
        return Parsed(None, "empty")
    letter = parse_letter(body, letters=tuple(options or LETTERS), options=options)
    if letter is not None:
        return Parsed(letter, "rule")
    if is_refusal(body):
        return Parsed(None, "refusal", refusal=True)
    return Parsed(None, "unparsed")


def without_thinking(text: str | None) -> str:
    """The reply with no thinking text: after the last `</think>`, and nothing of an unclosed `<think>`."""
    body = strip_reasoning(text)
    return "" if body.lower().startswith("<think>") else body


def extractor_prompt(text: str | None, mode: str = "official") -> str | None:
    """The extractor's request for a reply (None: nothing to show it).

    Official (evaluate/qwen3_infer.py `llm_check_infer`): its indented prompt with the reply exactly
    as the first-character rule saw it (stripped, after the last `</think>`; an unclosed `<think>`
    block goes as is). Robust: the paper's Figure 11 layout with the reply without any thinking.
    """
    if mode == "official":
        return read_prompt("extract", "if-bench.txt").replace("<input_response>", after_think(text))
    body = without_thinking(text)
    return read_prompt("extract", "if-bench-paper.txt").replace("<input_response>", body, 1) if body else None


def official_reply_letter(reply: str | None) -> str | None:
    """The official use of an extractor reply: its text after the last `</think>`, newlines (only)
    stripped from both ends, counts only when its first character is A-D, and then that character is
    the answer ("Based on..." is B). Else None: the official code keeps the original reply, whose first
    character is never A-D there (that is why it was asked), so the answer is wrong either way."""
    content = reply or ""
    if "</think>" in content:
        content = content.rsplit("</think>", 1)[1]
    content = content.strip("\n")
    return content[0] if content and content[0] in LETTERS else None


def judgment_counts(records: Sequence[Record], options_of: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
    """How the two modes differ on these answers and how many needed the extractor.

    An extractor verdict already in a record (parse_method "llm") stands in for whichever
    mode's rule could not answer; an answer neither rule nor judge resolved counts as none.
    """
    out = dict.fromkeys(("answers", "official_needs_extractor", "robust_needs_extractor", "extractor_used",
                         "extractor_unresolved", "modes_differ", "modes_differ_correctness"), 0)
    for r in records:
        if r.error is not None or r.response is None:
            continue
        out["answers"] += 1
        judged = r.parsed if r.parse_method == "llm" else None
        out["extractor_used"] += r.parse_method in ("llm", "llm_unresolved")
        out["extractor_unresolved"] += r.parse_method == "llm_unresolved"
        off = official_rule(r.response)
        rob = robust_rule(r.response, options_of.get(r.query_id))
        out["official_needs_extractor"] += off.method == "unparsed"
        out["robust_needs_extractor"] += rob.method == "unparsed"
        a = off.answer if off.answer is not None else judged if off.method == "unparsed" else None
        b = rob.answer if rob.answer is not None else judged if rob.method == "unparsed" else None
        out["modes_differ"] += (a if a in LETTERS else None) != (b if b in LETTERS else None)  # "F", "" = none
        out["modes_differ_correctness"] += (a == r.gold) != (b == r.gold)
    return out
