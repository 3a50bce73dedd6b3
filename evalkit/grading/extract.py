"""Answer extraction: pure rule parsers, and the prompts for the LLM extractor.

The rule parsers are deliberately conservative: an answer that is not clearly one option
is None ("unparsed"), never a guess, because a guessed letter is indistinguishable from a
real one in the metrics. Benchmarks with official quirky parsers implement those quirks
themselves; these are the robust parsers shared by all.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evalkit.core.resources import fill_template, read_prompt

# ---------------------------------------------------------------------------------------
# Text clean-up
# ---------------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.S | re.I)


def strip_reasoning(text: str | None) -> str:
    """Drop a reasoning model's thinking so the parsers only see the final answer."""
    if not text:
        return ""
    end = text.lower().rfind("</think>")
    if end >= 0:
        text = text[end + len("</think>") :]
    text = _THINK_BLOCK.sub("", text)
    return text.strip()


def _normalise(text: str) -> str:
    """NFKC (full-width letters and Chinese punctuation to ASCII) and no markdown emphasis."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"[*_`#]+", "", text)
    return text.strip()


# ---------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------

_REFUSAL = re.compile(
    r"\b(?:i\s*(?:'|’)?\s*m\s+sorry|i\s+am\s+sorry|sorry,|i\s+apologi[sz]e"
    r"|i\s+(?:cannot|can\s*not|can(?:'|’)t|am\s+(?:not\s+able|unable)|(?:'|’)m\s+(?:not\s+able|unable))"
    r"|unable\s+to\s+(?:determine|answer|tell|identify|provide|assist|help|process|analy[sz]e|view\s+(?:the\s+)?image)"
    r"|(?:not\s+possible|impossible)\s+to\s+(?:determine|tell|answer|say)"
    r"|as\s+an\s+ai|i\s+(?:do\s+not|don(?:'|’)t)\s+have\s+(?:the\s+)?(?:ability|access)"
    r"|抱歉|对不起|无法(?:回答|确定|判断|识别|看到)|不能(?:回答|确定|判断))",
    re.I,
)
_ANSWER_FIRST = re.compile(
    r"^\s*[\(\[]?[A-Z](?:[\)\]]|[.:)](?:\s|$)|$)|^\s*(?:final\s+)?answer\s*[:\-]", re.I
)


def is_refusal(text: str | None) -> bool:
    """A reply that declines to answer, judged on its opening (a quoted option may say "unable to")."""
    text = _normalise(strip_reasoning(text))
    if not text or _ANSWER_FIRST.match(text):
        return False
    return bool(_REFUSAL.search(text[:200]))


# ---------------------------------------------------------------------------------------
# Multiple-choice letters
# ---------------------------------------------------------------------------------------

# A capital letter that is really a word when followed by a lowercase word ("A cat", "I think").
_WORD_LETTERS = {"A", "I"}
# ...except after these, where it reads as a letter ("A because...", "A is correct", "A or B").
_LETTER_FOLLOWERS = {
    "because",
    "since",
    "as",
    "is",
    "was",
    "seems",
    "appears",
    "looks",
    "would",
    "should",
    "matches",
    "fits",
    "or",
    "and",
    "vs",
    "versus",
    "but",
}


def _is_prose(letter: str, after: str) -> bool:
    """Whether a capital letter followed by `after` is an English word rather than an answer."""
    if letter.upper() not in _WORD_LETTERS:
        return False
    m = re.match(r"\s+([a-z][a-z'’]*)", after)
    if m and m.group(1) not in _LETTER_FOLLOWERS:
        return True
    return bool(re.match(r"-[A-Za-z]", after))  # "A-frame"


def _alternative(after: str, letters: str) -> str | None:
    """A different letter offered as an alternative right after a letter ("A or B", "A/B")."""
    m = re.match(
        rf"\s*[\)\]]?\s*(?:,|/|\bor\b|\band\b|\bvs\.?|或者?|和|还是)\s*(?:(?:option|choice)\s*)?[\(\[]?([{letters}])(?![A-Za-z0-9])",
        after,
        re.I,
    )
    return m.group(1).upper() if m else None


def _letter_group(letters: str, *, lower: bool) -> str:
    """Regex for one letter as a token: uppercase anywhere, lowercase only before punctuation or end."""
    upper = rf"(?-i:([{letters}]))(?![A-Za-z0-9'’])"
    if not lower:
        return upper
    low = letters.lower()
    return rf"(?:{upper}|(?-i:([{low}]))(?=\s*(?:$|[.)\]:;,!。])))"


def _phrase_patterns(letters: str) -> dict[str, list[re.Pattern[str]]]:
    """Answer phrases by strength; the strongest tier that fires decides."""
    x = _letter_group(letters, lower=True)
    opt = r"(?:(?:option|choice|letter)\s*)?[:\-]?\s*[\(\[]?"
    return {
        "final": [re.compile(rf"\bfinal\s+answer\s*(?:is|:|-|=)?\s*{opt}{x}", re.I)],
        "answer": [
            re.compile(
                rf"\banswer(?:\s+(?:choice|option|letter))?\s*"
                rf"(?:is|would\s+be|should\s+be|will\s+be|must\s+be|=|:|-)?\s*{opt}{x}",
                re.I,
            ),
            re.compile(
                rf"\b(?:correct|right|best)\s+(?:answer|option|choice)\s*(?:is|:|-)?\s*{opt}{x}", re.I
            ),
            re.compile(rf"答案\s*(?:应该|应)?\s*(?:是|为|选)?\s*[:\-]?\s*(?:选项)?\s*[\(\[]?{x}", re.I),
            re.compile(rf"(?:应该|应)?选(?:择)?\s*(?:选项)?\s*[\(\[]?{x}", re.I),
            re.compile(rf"选项\s*[\(\[]?{x}", re.I),
        ],
        "choice": [
            re.compile(rf"\b(?:option|choice)\s*[:\-]?\s*[\(\[]?{x}", re.I),
            re.compile(
                rf"\b(?:i\s+(?:would\s+|will\s+)?|i(?:'|’)d\s+|i(?:'|’)ll\s+)?(?:choose|pick|select|go\s+with)\s+{opt}{x}",
                re.I,
            ),
            re.compile(
                rf"(?<![A-Za-z])[\(\[]?{_letter_group(letters, lower=False)}[\)\]]?\s*(?:is|seems|appears)\s+(?:to\s+be\s+)?"
                rf"(?:the\s+)?(?:correct|right|best|most\s+likely|answer)",
                re.I,
            ),
        ],
    }


def _tier_letters(text: str, patterns: Sequence[re.Pattern[str]], letters: str) -> set[str] | None:
    """Distinct letters the patterns name; None when one of them is offered with an alternative."""
    found: set[str] = set()
    for pattern in patterns:
        for m in pattern.finditer(text):
            letter = next(g for g in m.groups() if g).upper()
            after = text[m.end() :]
            if _is_prose(letter, after):
                continue
            other = _alternative(after, letters)
            if other and other != letter:
                return None
            found.add(letter)
    return found


def _bare(text: str, letters: str) -> str | None:
    """The letter when the whole text is just a letter: "C", "c.", "(C)", "[C]", "C)"."""
    m = re.fullmatch(rf"[\s\(\[\"'“]*([{letters}])[\s\)\]\"'”.:。!]*", text, re.I)
    return m.group(1).upper() if m else None


def _leading(text: str, letters: str) -> str | None | bool:
    """A letter opening the reply ("C) text", "C. text", "(D) because"); False if ambiguous."""
    m = re.match(rf"[\(\[]?([{letters}])(?:[\)\]]|(?=[.:,;\-–—]|\s|$))", text)
    if not m:
        return None
    letter, after = m.group(1), text[m.end() :]
    if _is_prose(letter, after) or re.match(r"[.:]\S", after) or re.match(r"'", after):
        return None  # "A cat", "A.I.", "I'm"
    other = _alternative(after, letters)
    if other and other != letter:
        return False
    return letter


def _token_letters(text: str, letters: str) -> set[str]:
    """Every capital letter standing alone as a token, minus articles and pronouns in prose."""
    found = set()
    for m in re.finditer(rf"(?<![A-Za-z0-9'’\-])([{letters}])(?![A-Za-z0-9'’])", text):
        if not _is_prose(m.group(1), text[m.end() :]) and not re.match(r"[.\-][A-Za-z0-9]", text[m.end() :]):
            found.add(m.group(1))
    return found


def _norm_option(text: str) -> str:
    return re.sub(r"\s+", " ", _normalise(text).lower()).strip(" .。!！\"'“”")


def _option_match(text: str, options: Mapping[str, str], letters: str) -> tuple[str | None, bool]:
    """(letter, exact): the option whose text the reply is, or the single one it contains."""
    reply = _norm_option(text)
    norm = {
        k.upper(): _norm_option(v) for k, v in options.items() if k.upper() in letters and _norm_option(v)
    }
    exact = [k for k, v in norm.items() if v == reply]
    if len(exact) == 1:
        return exact[0], True
    hits = {k: v for k, v in norm.items() if re.search(rf"(?<!\w){re.escape(v)}(?!\w)", reply)}
    # "dark red" also contains "red": keep only options not inside another matched option.
    hits = {k: v for k, v in hits.items() if not any(v != w and v in w for w in hits.values())}
    if len(hits) == 1:
        return next(iter(hits)), False
    return None, False


def parse_letter(
    text: str | None,
    letters: Sequence[str] = ("A", "B", "C", "D"),
    options: Mapping[str, str] | None = None,
) -> str | None:
    """The option letter a reply chose, or None when it chose none, several, or refused.

    Tries, from most to least certain: the reply is only a letter; the reply is exactly one
    option's text; "final answer X"; "answer is X"/"答案是X"/"选X"; (a refusal stops here);
    a letter opening the reply; the last line being a letter; "option X"/"I choose X"/"X is
    correct"; a single letter token anywhere; a single option text contained in the reply.
    The first step that names two different letters ends the search with None.
    """
    text = _normalise(strip_reasoning(text))
    letter_set = "".join(sorted({str(x).upper() for x in letters if len(str(x)) == 1 and str(x).isalpha()}))
    if not text or not letter_set:
        return None
    bare = _bare(text, letter_set)
    if bare:
        return bare
    if options:
        match, exact = _option_match(text, options, letter_set)
        if exact:
            return match
    tiers = _phrase_patterns(letter_set)
    for tier in ("final", "answer"):
        found = _tier_letters(text, tiers[tier], letter_set)
        if found is None or len(found) > 1:
            return None
        if found:
            return found.pop()
    if is_refusal(text):  # checked after explicit answers: "I can't be sure, but the answer is B" is B
        return None
    lead = _leading(text, letter_set)
    if lead is False:
        return None
    if lead:
        return lead
    last = _bare(text.splitlines()[-1], letter_set)
    if last:
        return last
    found = _tier_letters(text, tiers["choice"], letter_set)
    if found is None or len(found) > 1:
        return None
    if found:
        return found.pop()
    tokens = _token_letters(text, letter_set)
    if len(tokens) == 1:
        return tokens.pop()
    if tokens:
        return None
    if options:
        return _option_match(text, options, letter_set)[0]
    return None


# ---------------------------------------------------------------------------------------
# Yes / No
# ---------------------------------------------------------------------------------------

_YES_CN = {"是", "是的", "对", "正确", "有"}
_NO_CN = {"否", "不是", "不", "不对", "错误", "没有"}


def parse_yes_no(text: str | None) -> str | None:
    """ "Yes" or "No" when the reply commits to exactly one of them, else None."""
    text = _normalise(strip_reasoning(text))
    low = text.lower()
    if not low:
        return None
    bare = low.strip(" .。!！,，")
    if bare in _YES_CN:
        return "Yes"
    if bare in _NO_CN:
        return "No"
    if re.search(r"\byes\b\s*(?:or|and|/)\s*no\b|\bno\b\s*(?:or|and|/)\s*yes\b", low):
        return None
    # Standalone "yes"/"no" (before punctuation or the end); "no" before a noun is prose ("no dog").
    said = {m.group(1) for m in re.finditer(r"(?<![\w-])(yes|no)\b(?!-)(?=\s*(?:[.,!?;:)\"'\]\n]|$))", low)}
    lead = re.match(r"[\s\"'(\[]*(yes|no)\b(?!-)", low)
    if lead and not said - {lead.group(1)}:
        return lead.group(1).capitalize()
    return said.pop().capitalize() if len(said) == 1 else None


# ---------------------------------------------------------------------------------------
# LLM extractor
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeRequest:
    """A prompt for the LLM extractor, and how to read its reply back into an answer."""

    prompt: str
    valid: tuple[str, ...]  # the answers the judge may return (e.g. ("A","B","C","D"))


def render_options(options: Mapping[str, str]) -> str:
    """Options one per line as "A. text", the form the extractor prompts expect."""
    return "\n".join(f"{k}. {v}" for k, v in options.items())


def judge_prompt_mcq(question: str, options: Mapping[str, str], response: str) -> str:
    """The extractor prompt asking which single option a response chose."""
    return fill_template(
        read_prompt("extract", "mcq.txt"),
        question=question,
        options=render_options(options),
        response=response,
    )


def judge_prompt_yesno(question: str, response: str) -> str:
    """The extractor prompt asking whether a response means Yes or No."""
    return fill_template(read_prompt("extract", "yesno.txt"), question=question, response=response)


def parse_judge_reply(reply: str | None, valid: Sequence[str]) -> str | None:
    """The first valid answer token in the extractor's reply; "Z"/"Unknown" (or nothing) is None.

    Single-letter answers must be capitals, so an article "a" in a chatty reply is not taken.
    """
    text = _normalise(strip_reasoning(reply))
    canon = {v.lower(): v for v in valid}
    for token in re.findall(r"[A-Za-z]+", text):
        low = token.lower()
        if low not in canon and (token == "Z" or low == "unknown"):
            return None
        if low in canon and (len(token) > 1 or token.isupper()):
            return canon[low]
    return None
