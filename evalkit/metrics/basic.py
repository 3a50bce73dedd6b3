"""Counts and accuracies over records: the numbers every benchmark reports.

Errors, refusals, unparsed and wrong answers are counted apart (a failed request is not a
wrong answer), but all of them count as not correct in accuracy, so a model cannot gain
by failing. Percentages are full floats in 0..100; rounding is the report's job.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from evalkit.core.record import Record


def outcome(record: Record) -> str:
    """The one bucket a record falls in: errors, correct, wrong, refusals, cutoffs or unparsed.

    A cut-off (the token limit ended the reply while the model was still thinking) is not an
    unparsed answer: there is no answer, and the remedy is a larger --max-tokens."""
    if record.error:
        return "errors"
    if record.correct is True:
        return "correct"
    if record.parsed is not None:
        return "wrong"
    if record.refusal:
        return "refusals"
    if record.cut_off:
        return "cutoffs"
    return "unparsed"


def outcome_counts(records: Iterable[Record]) -> dict[str, int]:
    """How many records are correct, wrong (parsed but incorrect), unparsed, errors, refusals, cutoffs."""
    out = dict.fromkeys(("correct", "wrong", "unparsed", "errors", "refusals", "cutoffs"), 0)
    for record in records:
        out[outcome(record)] += 1
    return out


def accuracy(records: Sequence[Record]) -> float:
    """Percent of records with correct True over all records (0.0 for none)."""
    if not records:
        return 0.0
    return 100.0 * sum(1 for r in records if r.correct is True) / len(records)


def accuracy_by(records: Iterable[Record], key: Callable[[Record], str]) -> dict[str, float]:
    """Accuracy per group (e.g. per category), groups in sorted order."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        groups[key(record)].append(record)
    return {name: accuracy(groups[name]) for name in sorted(groups)}


def usage_totals(records: Iterable[Record]) -> dict[str, int]:
    """Token usage summed over records; input/output tokens always present."""
    total: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
    for record in records:
        for name, value in (record.usage or {}).items():
            kind = type(value)
            if kind is int or kind is float or (kind is not bool and isinstance(value, (int, float))):
                total[name] = total.get(name, 0) + int(value)
    return total
