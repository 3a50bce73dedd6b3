"""RGB-Th-Bench parsing: the official substring rule and the robust reading, on golden replies, and a
refusal counted in both modes."""

from __future__ import annotations

import pytest

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.rgbth import parse_official, parse_robust
from evalkit.core.types import Query

OFFICIAL = {
    "Yes": "Yes", "No": "No", "yes.": "Yes", "NO": "No", "The answer is yes": "Yes",
    "Yes, there is no damage": "Yes", "I cannot say": "No", "unknown": "No", "It is not hot.": "No",
    "Nope": "No", "Eyes are visible": "Yes", "\n<|begin_of_box|>No<|end_of_box|>": "No",
    "Maybe": None, "": None, "Error: Server disconnected without sending a response.": None,
    "Hard to tell, but yes": "Yes",
}
ROBUST = {
    "Yes": "Yes", "No": "No", "yes.": "Yes", "The answer is yes": "Yes", "Yes, there is no damage": "Yes",
    "I cannot say": None, "unknown": None, "It is not hot.": None, "Nope": None, "Eyes are visible": None,
    "\n<|begin_of_box|>No<|end_of_box|>": "No", "<think>maybe yes</think>No": "No", "Maybe": None, "": None,
    "Yes or no?": None, "I'm sorry, but I can't help with that. Yes": None,
}


@pytest.mark.parametrize(("text", "want"), OFFICIAL.items())
def test_parse_official_golden(text, want):
    assert parse_official(text) == want


@pytest.mark.parametrize(("text", "want"), ROBUST.items())
def test_parse_robust_golden(text, want):
    assert parse_robust(text) == want


def _query(gold: str = "No") -> Query:
    return Query(id="S/x/b00/q0", item_id="S/x/b00/q0", base_id="S/x/b00/q0", variant={}, messages=(), gold=gold,
                 category="Scene Understanding")


def test_refusal_counted_in_both_modes():
    bench = get_benchmark("rgb-th-bench")
    official = bench.parse(_query(), "I cannot say", "official")
    robust = bench.parse(_query(), "I cannot say", "robust")
    assert (official.answer, official.refusal) == ("No", True)  # substring rule: a refusal scores as No
    assert (robust.answer, robust.method, robust.refusal) == (None, "refusal", True)
    assert bench.score(_query("No"), official) is True and bench.score(_query("No"), robust) is False
    yes = bench.parse(_query(), "Yes, there is no damage", "robust")
    assert (yes.answer, yes.refusal) == ("Yes", False)
