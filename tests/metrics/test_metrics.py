"""Basic metrics: every record lands in exactly one bucket, and failures never count as correct."""

from __future__ import annotations

import pytest

from evalkit.core.record import Record
from evalkit.metrics.basic import accuracy, accuracy_by, outcome, outcome_counts, usage_totals


def rec(
    correct: bool | None = None,
    parsed: str | None = None,
    error: str | None = None,
    refusal: bool = False,
    category: str = "",
    usage: dict[str, int] | None = None,
) -> Record:
    return Record(
        query_id="q",
        item_id="i",
        base_id="b",
        variant={},
        model="m",
        request_key="k",
        response=None if error else "text",
        gold="A",
        parsed=parsed,
        correct=correct,
        refusal=refusal,
        error=error,
        category=category,
        usage=usage or {},
    )


RECORDS = [
    rec(correct=True, parsed="A", category="x"),
    rec(correct=True, parsed="A", category="x"),
    rec(correct=False, parsed="B", category="x"),  # wrong
    rec(correct=False, parsed=None, category="y"),  # unparsed
    rec(correct=False, parsed=None, refusal=True, category="y"),  # refusal
    rec(error="rate_limit", category="y"),  # error
    rec(correct=None, parsed=None, error="permanent", category="z"),  # error
]


def test_counts_are_a_partition() -> None:
    c = outcome_counts(RECORDS)
    assert c == {"correct": 2, "wrong": 1, "unparsed": 1, "errors": 2, "refusals": 1, "cutoffs": 0}
    assert sum(c.values()) == len(RECORDS)
    assert outcome_counts([]) == {"correct": 0, "wrong": 0, "unparsed": 0, "errors": 0, "refusals": 0, "cutoffs": 0}


def test_outcome_priorities() -> None:
    # an error wins over anything else recorded
    assert outcome(rec(correct=True, parsed="A", error="transient")) == "errors"
    # a refusal that was still parsed (e.g. official first-letter rule) is a wrong answer
    assert outcome(rec(correct=False, parsed="I", refusal=True)) == "wrong"
    assert outcome(rec(correct=None)) == "unparsed"


def test_accuracy_counts_failures_as_not_correct() -> None:
    assert accuracy(RECORDS) == pytest.approx(100 * 2 / 7)
    assert accuracy([]) == 0.0
    assert accuracy([rec(correct=True, parsed="A")]) == 100.0


def test_accuracy_by_group() -> None:
    by = accuracy_by(RECORDS, lambda r: r.category)
    assert list(by) == ["x", "y", "z"]
    assert by["x"] == pytest.approx(200 / 3)
    assert by["y"] == 0.0 and by["z"] == 0.0


def test_usage_totals() -> None:
    records = [
        rec(usage={"input_tokens": 10, "output_tokens": 3}),
        rec(usage={"input_tokens": 5, "output_tokens": 2, "reasoning_tokens": 7}),
        rec(),
    ]
    assert usage_totals(records) == {"input_tokens": 15, "output_tokens": 5, "reasoning_tokens": 7}
    assert usage_totals([]) == {"input_tokens": 0, "output_tokens": 0}
