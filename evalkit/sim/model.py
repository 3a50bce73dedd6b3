"""The simulated model: a pure, deterministic function from (prompt text, image fingerprints) to a reply.

Its behaviour follows the reliability model evalkit measures: a base question is "known" with
probability theta; a known question is answered correctly with probability r, an unknown one with
probability g (a guess). Every draw is a sha256-derived uniform number, so the same request gets
the same answer in every process and on every run, which is what caching and resume tests need.

With `sample_rate` > 0 the model samples, as a reasoning model does: a request with a temperature
above 0 or a seed gets another answer than its own with that probability, drawn per (request,
sample). The sample is the request's seed when it sends one; without a seed, identical requests
cannot be told apart by their content, so the k-th identical request this server answers gets
sample k (a retry draws again too). The first seedless request is sample 0.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.grading import vlmeval

if TYPE_CHECKING:
    from evalkit.sim.answerkey import AnswerEntry, AnswerKey

STYLES = ("letter", "sentence", "verbose", "ordinal", "refusal", "first", "yes", "mixed")
# "ordinal" ("the second option") defeats rule parsers on purpose: it is what the LLM extractor is for.
MIXED_STYLES = ("letter", "sentence", "verbose", "letter", "sentence", "verbose", "ordinal")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
REFUSAL = "I'm sorry, but I can't help with identifying that."
YES_NO = ("Yes", "No")

_OPTION_LINE = re.compile(r"^[ \t]*\(?([A-Z])[.):][ \t]+\S", re.MULTILINE)
_OPTION_DICT_KEY = re.compile(r"""['"]([A-Z])['"]\s*:""")
_STANDALONE_LETTER = re.compile(r"(?<![A-Za-z0-9'])([A-E])(?![A-Za-z0-9'])")
_YES = re.compile(r"\byes\b", re.IGNORECASE)
_NO = re.compile(r"\bno\b", re.IGNORECASE)


@dataclass(frozen=True)
class SimParams:
    """theta: share of base questions known; r: accuracy when known; g: accuracy when guessing
    (None: 1 / number of options); style: how the reply is worded (see STYLES); sample_rate: share of
    sampled requests (temperature > 0 or a seed) answered otherwise than the model's own answer.
    The defaults are an exact model (every answer right), which tests rely on; `evalkit sim`'s flags
    default to a plausible one (evalkit.sim.args.PLAUSIBLE). drift: share of replies worded off the asked
    format (a letter as "the second option", Yes/No as "Affirmative.", a box as prose with extra numbers),
    which the rules cannot read; a request carrying an answer schema (`--structured`) is never drifted."""

    theta: float = 1.0
    r: float = 1.0
    g: float | None = None
    seed: int = 0
    style: str = "letter"
    sample_rate: float = 0.0
    drift: float = 0.0

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"unknown sim style {self.style!r}; expected one of {', '.join(STYLES)}")
        if not 0.0 <= self.drift <= 1.0:
            raise ValueError(f"drift must be within 0..1, not {self.drift}")
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ValueError(f"sample rate must be within 0..1, not {self.sample_rate}")


@dataclass(frozen=True)
class Sampling:
    """What a request body says about sampling (None: not sent)."""

    temperature: float | None = None
    seed: int | None = None

    @property
    def sampled(self) -> bool:
        return (self.temperature is not None and self.temperature > 0) or self.seed is not None


def sampling_of(body: Any) -> Sampling:
    """Temperature and seed of a body in any dialect: OpenAI / vLLM and Anthropic at the top level
    (Anthropic sends no seed), Gemini in generationConfig (or generation_config)."""
    if not isinstance(body, dict):
        return Sampling()
    config = body.get("generationConfig", body.get("generation_config"))
    where = config if isinstance(config, dict) else body
    temperature, seed = where.get("temperature"), where.get("seed")
    return Sampling(float(temperature) if isinstance(temperature, int | float) and not isinstance(temperature, bool)
                    else None, seed if isinstance(seed, int) and not isinstance(seed, bool) else None)


@dataclass(frozen=True)
class SimReply:
    """What the model says, the answer it meant (None for refusals/unknown), and why."""

    content: str
    answer: str | None
    source: str  # "key", "replay", "judge", "unknown"


def uniform(*parts: object) -> float:
    """A deterministic uniform float in [0, 1) from the parts (not Python's salted hash())."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def server_estimate_tokens(text: str) -> int:
    """Roughly four characters per token, the usual rule of thumb."""
    return math.ceil(len(text) / 4)


def server_image_tokens(width: int, height: int) -> int:
    """OpenAI-style image cost: 85 base tokens plus 170 per 512-pixel tile."""
    tiles = max(1, math.ceil(width / 512)) * max(1, math.ceil(height / 512))
    return 85 + 170 * tiles


def prompt_letters(text: str) -> list[str]:
    """Option letters shown in a prompt ("A. cat" lines or "'A':" dict keys), in order of appearance."""
    found: list[str] = []
    for m in _OPTION_LINE.finditer(text):
        if m.group(1) not in found:
            found.append(m.group(1))
    if not found:
        for m in _OPTION_DICT_KEY.finditer(text):
            if m.group(1) not in found:
                found.append(m.group(1))
    return found


def prompt_options(text: str) -> dict[str, str]:
    """Letter -> option text for "A. cat" style lines."""
    out: dict[str, str] = {}
    for line in text.split("\n"):  # an option may hold U+2028 or U+0085, which splitlines() splits at
        m = re.match(r"^[ \t]*\(?([A-Z])[.):][ \t]+(.+?)\s*$", line)
        if m and m.group(1) not in out:
            out[m.group(1)] = m.group(2)
    return out


def _default_prompt_dirs() -> list[Path]:
    here = Path(__file__).resolve()
    return [here.parents[2] / "prompts", here.parents[1] / "prompts"]


def judge_heads(prompt_dirs: list[Path] | None = None) -> dict[str, str]:
    """First non-blank line of each extractor prompt -> its kind ("mcq" / "yesno" / "if-bench" / "vlmeval",
    VLMEvalKit's matching prompt that TDBench's official mode sends, in English and Chinese); the prompt
    files' kinds are left out if not found. Requests are matched on their text without leading whitespace
    (IF-Bench's official extractor prompt starts with a newline and indents its lines)."""
    heads: dict[str, str] = {vlmeval.judge_prompt(q, {}, "").split("\n", 1)[0]: "vlmeval" for q in ("q", "问")}
    for kind, file in (("mcq", "mcq"), ("yesno", "yesno"), ("if-bench", "if-bench"), ("if-bench", "if-bench-paper")):
        for d in prompt_dirs or _default_prompt_dirs():
            path = d / "extract" / f"{file}.txt"
            if path.is_file():
                first = next((ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()), "")
                if first:
                    heads[first] = kind
                break
    return heads


def _vlmeval_parts(text: str) -> tuple[dict[str, str], str]:
    """(options, answer) of the example VLMEvalKit's matching prompt asks about: its last one."""
    start = max(text.rfind("\nOptions: There are several options: \n"), text.rfind("\n选项: There are several options: \n"))
    if start < 0:
        return {}, ""
    rest = text[start:]
    marks = [i for i in (rest.find("\nAnswer: "), rest.find("\n答案: ")) if i >= 0]
    if not marks:
        return {}, ""
    cut = min(marks)
    answer = rest[cut:].split(": ", 1)[1]
    end = max(answer.rfind("\nYour output: "), answer.rfind("\n输出: "))
    return prompt_options(rest[:cut]), answer[:end] if end >= 0 else answer


def judge_answer(kind: str, text: str) -> str:
    """What a careful judge replies to an extractor prompt: the chosen letter, or Z / Unknown."""
    if kind == "vlmeval":
        options, answer = _vlmeval_parts(text)
        return _chosen(answer, options)
    if kind == "if-bench":  # only the response ("Input: ...", maybe indented), A-D, or F for none
        inputs = list(re.finditer(r"\n[ \t]*Input: ", text))
        reply = text[inputs[-1].end():] if inputs else ""
        found = {m.group(1) for m in _STANDALONE_LETTER.finditer(reply)} & set("ABCD")
        ordinal = [i for i, word in enumerate(ORDINALS[:4]) if re.search(rf"\b{word}\b", reply.lower())]
        return found.pop() if len(found) == 1 else "ABCD"[ordinal[0]] if not found and len(ordinal) == 1 else "F"
    start = text.find("\nAnswer: ")
    end = text.rfind("\nYour reply:")
    answer = text[start + len("\nAnswer: ") : end if end > start else None] if start >= 0 else ""
    if kind == "yesno":
        yes, no = bool(_YES.search(answer)), bool(_NO.search(answer))
        return "Yes" if yes and not no else "No" if no and not yes else "Unknown"
    opts_start = text.find("\nOptions:\n")
    return _chosen(answer, prompt_options(text[opts_start:start]) if 0 <= opts_start < start else {})


def _chosen(answer: str, options: dict[str, str]) -> str:
    """The one option an answer names (its letter alone, its text, or "the second option"), else Z."""
    letters = {m.group(1) for m in _STANDALONE_LETTER.finditer(answer)}
    if options:
        letters &= set(options)
    if len(letters) == 1:
        return letters.pop()
    if not letters:
        low = answer.lower()
        named = [k for k, v in options.items() if v and v.lower() in low]
        if len(named) == 1:
            return named[0]
        ordinal = [i for i, word in enumerate(ORDINALS) if re.search(rf"\b{word}\b", low)]
        if len(ordinal) == 1 and ordinal[0] < len(options):
            return list(options)[ordinal[0]]
    return "Z"


class SimModel:
    """Answers requests from an answer key; pure apart from the judge prompts it reads once and the count
    of seedless sampled requests (see the module docstring)."""

    def __init__(self, params: SimParams | None = None, key: AnswerKey | None = None,
                 prompt_dirs: list[Path] | None = None) -> None:
        self.params = params or SimParams()
        self.key = key
        self._judge_heads = judge_heads(prompt_dirs)
        self._asked: dict[tuple[Any, ...], int] = {}  # seedless sampled requests answered so far, by content

    # -- decisions -----------------------------------------------------------------------

    def knows(self, base_id: str) -> bool:
        """Known-ness is a property of the base question, shared by all its variants."""
        return uniform(self.params.seed, "known", base_id) < self.params.theta

    def choices(self, entry: AnswerEntry, text: str) -> list[str]:
        """What the model may answer for this entry: Yes/No, the option letters, or the prompt's letters."""
        if entry.answer in YES_NO:
            return list(YES_NO)
        if entry.options:
            return list(entry.options)
        return prompt_letters(text) or ["A", "B", "C", "D"]

    def decide(self, entry: AnswerEntry, text: str) -> str:
        """The answer (letter or Yes/No) the model gives for a known entry.

        Correctness is drawn from the entry's own text and fingerprints, not the request's, so
        a client that resizes or re-encodes differently still gets the same answer.
        """
        p = self.params
        choices = self.choices(entry, text)
        known = self.knows(entry.base_id)
        g = p.g if p.g is not None else 1.0 / max(1, len(choices))
        ident = (p.seed, entry.base_id, entry.text, *entry.images)
        if uniform(*ident, "correct") < (p.r if known else g):
            return entry.answer
        others = [c for c in choices if c != entry.answer]
        if not others:
            return "B" if entry.answer == "A" else "A"
        return others[int(uniform(*ident, "wrong") * len(others))]

    def sample(self, answer: str, choices: list[str], text: str, fps: list[str], sampling: Sampling | None) -> str:
        """The answer of this sample: the model's own, or with probability sample_rate another of the
        choices (see the module docstring for which sample a request is)."""
        if self.params.sample_rate <= 0 or sampling is None or not sampling.sampled:
            return answer
        if sampling.seed is not None:
            index = f"seed {sampling.seed}"
        else:
            content = (text, *fps, sampling.temperature)
            index = f"draw {self._asked.get(content, 0)}"
            self._asked[content] = self._asked.get(content, 0) + 1
        ident = (self.params.seed, "sample", text, *fps, index)
        others = [c for c in choices if c != answer]
        if not others or uniform(*ident) >= self.params.sample_rate:
            return answer
        return others[int(uniform(*ident, "which") * len(others))]

    # -- wording -------------------------------------------------------------------------

    def style_for(self, text: str, fps: list[str]) -> str:
        if self.params.style != "mixed":
            return self.params.style
        return MIXED_STYLES[int(uniform(self.params.seed, "style", text, *fps) * len(MIXED_STYLES))]

    @staticmethod
    def render(style: str, answer: str, options: dict[str, str], letters: list[str]) -> str:
        """Word an answer in a style. Verbose prose names the choice once and no other letter."""
        yes_no = answer in YES_NO
        if style == "refusal":
            return REFUSAL
        if style == "yes":
            return "Yes"
        if style == "first":
            return "Yes" if yes_no else (list(options) or letters or ["A"])[0]
        if style == "sentence":
            return f"The answer is {answer}." if yes_no else f"The answer is ({answer})."
        if style == "verbose":
            if yes_no:
                return (
                    "Looking at the image carefully, the relevant details are clearly visible. "
                    "After weighing what the picture shows against the question, "
                    f"my answer is {answer.lower()}."
                )
            option_text = options.get(answer, "")
            tail = f", {option_text}" if option_text else ""
            return (
                "Looking at the image carefully, the relevant details are clearly visible. "
                "After weighing each choice against what the picture shows, "
                f"I would go with option {answer}{tail}."
            )
        if style == "ordinal" and not yes_no and answer in options:
            return f"I'd go with the {ORDINALS[list(options).index(answer)]} option."
        return answer

    # -- entry point ---------------------------------------------------------------------

    @staticmethod
    def off_format(answer: str, options: dict[str, str]) -> str:
        """An answer worded off the asked format, so the rules cannot read it (SimParams.drift)."""
        if answer in YES_NO:
            return "Affirmative." if answer == "Yes" else "Negative."
        box = [float(x) for x in re.findall(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)", answer)] if answer.startswith("[") else []
        if len(box) == 4:
            return (f"The left edge is at {box[0]:g} and the top at {box[1]:g}; the right edge at {box[2]:g} and "
                    f"the bottom at {box[3]:g}, measured on a 1 by 1 frame.")
        if answer in options:
            return f"I'd go with the {ORDINALS[list(options).index(answer) % len(ORDINALS)]} option."
        return f"My pick: {answer.lower()}, all things considered, 2 of 3 times."

    def drifts(self, text: str, fps: list[str]) -> bool:
        """This request's reply is worded off the asked format (a share `drift` of requests)."""
        return self.params.drift > 0 and uniform(self.params.seed, "drift", text, *fps) < self.params.drift

    def reply(self, text: str, fps: list[str], sampling: Sampling | None = None,
              structured: bool = False) -> SimReply:
        """The reply to one request, given only what is in its body (`sampling`: its temperature and seed;
        `structured`: it asks for its answer in a schema, so it never drifts off the format)."""
        opening = text.lstrip()  # extractor prompts are recognised by their first line
        for head, kind in self._judge_heads.items():
            if opening.startswith(head):
                return SimReply(judge_answer(kind, text), None, "judge")
        entry = self.key.lookup(text, fps) if self.key is not None else None
        if entry is not None and entry.reply is not None:
            return SimReply(entry.reply, None, "replay")
        style = self.style_for(text, fps)
        letters = prompt_letters(text)
        if entry is not None:
            answer = self.sample(self.decide(entry, text), self.choices(entry, text), text, fps, sampling)
            options = entry.options or prompt_options(text)
            source = "key"
        else:
            pool = letters or ["A"]
            answer = self.sample(pool[int(uniform(self.params.seed, "unknown", text) * len(pool))], pool, text, fps,
                                 sampling)
            options = prompt_options(text)
            source = "unknown"
        content = self.render(style, answer, options, letters)
        if not structured and style != "refusal" and self.drifts(text, fps):
            content = self.off_format(answer, options)
        meant = None if style == "refusal" else "Yes" if style == "yes" else content if style == "first" else answer
        return SimReply(content, meant, source)
