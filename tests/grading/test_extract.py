"""Rule parsers: a table of real-looking replies, including the traps (articles, alternatives)."""

from __future__ import annotations

import pytest

from evalkit.grading.extract import (
    is_refusal,
    judge_prompt_mcq,
    judge_prompt_yesno,
    parse_judge_reply,
    parse_letter,
    parse_yes_no,
    render_options,
    strip_reasoning,
)

OPTS = {"A": "red", "B": "blue", "C": "green", "D": "dark red"}

LETTER_CASES = [
    # plain letters
    ("C", "C"),
    ("C.", "C"),
    ("(C)", "C"),
    ("[B]", "B"),
    ("c", "C"),
    ("**B**", "B"),
    ("  D  ", "D"),
    ("Ｃ", "C"),  # full-width
    # letter first, then text
    ("C) green", "C"),
    ("C. green", "C"),
    ("A. red", "A"),
    ("A: red", "A"),
    ("(D) because the circle is dark", "D"),
    ("B because it looks blue", "B"),
    # answer phrases
    ("Answer: C", "C"),
    ("**Answer:** B", "B"),
    ("The answer is (C).", "C"),
    ("The correct answer is B.", "B"),
    ("The correct option is C", "C"),
    ("The answer is A because it is red", "A"),
    ("Final answer: D", "D"),
    ("Let me think step by step. The circle is clearly red. So the answer is A.", "A"),
    ("I cannot be certain, but the answer is B.", "B"),
    ("Option C", "C"),
    ("I choose C: green", "C"),
    ("I would go with option (B).", "B"),
    ("A is correct", "A"),
    ("I think it's B", "B"),
    ("Option A is red, option B is blue.\n\nB", "B"),
    # Chinese
    ("答案是C", "C"),
    ("答案：Ｃ", "C"),
    ("正确答案为 B。", "B"),
    ("选C", "C"),
    ("我选择选项D", "D"),
    # reasoning models
    ("</think>B", "B"),
    ("<think>A is wrong, C maybe</think>The answer is B", "B"),
    ("I consider A and C...</think>\nD", "D"),
    # option text
    ("green", "C"),
    ("Green.", "C"),
    ("The circle is blue.", "B"),
    ("It is dark red.", "D"),  # "red" is inside "dark red": the longer one wins
    ("Dark Red", "D"),
    # articles and words are not letters
    ("A cat sits on the mat", None),
    ("A red circle", "A"),  # not the article: the option text "red"
    ("A.I. says C", "C"),
    ("The image shows a B-52 bomber", None),
    # ambiguous or no answer
    ("A or B", None),
    ("A, B", None),
    ("The answer is A or B", None),
    ("Either (A) or (C).", None),
    ("Both A and C are plausible", None),
    ("It's red or blue", None),
    ("The answer is A. No wait, the answer is C.", None),
    ("", None),
    ("   ", None),
    ("I'm sorry, I can't help with that.", None),
    ("I cannot determine the colour from this image.", None),
    ("Hmm, hard to say.", None),
]


@pytest.mark.parametrize(("reply", "expected"), LETTER_CASES)
def test_parse_letter(reply: str, expected: str | None) -> None:
    assert parse_letter(reply, options=OPTS) == expected


def test_parse_letter_without_options_does_not_match_text() -> None:
    assert parse_letter("The circle is blue.") is None
    assert parse_letter("B") == "B"


def test_parse_letter_respects_letter_set() -> None:
    assert parse_letter("E", letters=("A", "B", "C", "D")) is None
    assert parse_letter("E", letters=("A", "B", "C", "D", "E")) == "E"
    assert parse_letter("The answer is E.", letters=tuple("ABCDE")) == "E"
    assert parse_letter("C", letters=("A", "B")) is None


def test_strip_reasoning() -> None:
    assert strip_reasoning("<think>x</think> B ") == "B"
    assert strip_reasoning("a</think>b</think> C") == "C"
    assert strip_reasoning("no thinking") == "no thinking"
    assert strip_reasoning(None) == ""


YES_NO_CASES = [
    ("yes", "Yes"),
    ("Yes.", "Yes"),
    ("YES", "Yes"),
    ("No, there is not", "No"),
    ("**No**", "No"),
    ("The answer is yes", "Yes"),
    ("Answer: No.", "No"),
    ("I think yes.", "Yes"),
    ("Yes, there is no car in the image.", "Yes"),
    ("是", "Yes"),
    ("否", "No"),
    ("</think>No", "No"),
    ("Yes or no", None),
    ("There is no dog.", None),
    ("Not sure", None),
    ("maybe", None),
    ("No. Yes.", None),
    ("", None),
]


@pytest.mark.parametrize(("reply", "expected"), YES_NO_CASES)
def test_parse_yes_no(reply: str, expected: str | None) -> None:
    assert parse_yes_no(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("I'm sorry, but I can't help with that.", True),
        ("I cannot answer questions about this image.", True),
        ("I can't determine which option is correct.", True),
        ("As an AI, I do not make judgements.", True),
        ("I am unable to view the image.", True),
        ("抱歉，我无法回答。", True),
        ("B. The man is unable to swim", False),
        ("The answer is C.", False),
        ("A", False),
        ("", False),
    ],
)
def test_is_refusal(reply: str, expected: bool) -> None:
    assert is_refusal(reply) is expected


def test_judge_prompts_fill_templates() -> None:
    prompt = judge_prompt_mcq("What colour?", {"A": "red", "B": "blue"}, "it is {blue}")
    assert "Question: What colour?" in prompt
    assert "A. red\nB. blue" in prompt
    assert "Answer: it is {blue}" in prompt  # braces in a response are left alone
    assert "{" not in prompt.replace("{blue}", "")
    yn = judge_prompt_yesno("Is it hot?", "Probably")
    assert "Question: Is it hot?" in yn and "Answer: Probably" in yn and "{" not in yn
    assert render_options({"A": "x", "B": "y"}) == "A. x\nB. y"


@pytest.mark.parametrize(
    ("reply", "valid", "expected"),
    [
        ("B", "ABCD", "B"),
        (" c ", "ABCD", None),  # lowercase single letters are not taken (articles)
        ("The answer is C.", "ABCD", "C"),
        ("Z", "ABCD", None),
        ("Z (none chosen)", "ABCD", None),
        ("Yes", ("Yes", "No"), "Yes"),
        ("no", ("Yes", "No"), "No"),
        ("Unknown", ("Yes", "No"), None),
        ("", "ABCD", None),
        ("<think>maybe A</think>D", "ABCD", "D"),
    ],
)
def test_parse_judge_reply(reply: str, valid: str | tuple[str, ...], expected: str | None) -> None:
    assert parse_judge_reply(reply, tuple(valid)) == expected
