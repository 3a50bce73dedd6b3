"""Circular evaluation (MMBench's CircularEval): ask every rotation of the option list.

A model with a position bias ("always A") scores exactly chance under it, and a question
counts as solved only if every rotation is right. The direction and the gold remapping
follow IF-Bench's official code (docs/protocols.md, IF-Bench), for any number of options: under shift
i, display letter j shows the text that was at letter (j - i) mod n, so the correct letter
becomes letters[(answer_index + i) mod n]. With four options, shift 1 shows D, A, B, C.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from evalkit.core.record import Record


def shift_options(options: Mapping[str, str], answer: str, shift: int) -> tuple[dict[str, str], str]:
    """(options as shown under `shift`, the gold letter there), keeping the display letters."""
    letters = list(options)
    n = len(letters)
    if n == 0:
        raise ValueError("no options to shift")
    if answer not in options:
        raise ValueError(f"answer {answer!r} is not among the options {', '.join(letters)}")
    texts = [options[k] for k in letters]
    shown = {letters[j]: texts[(j - shift) % n] for j in range(n)}
    gold = letters[(letters.index(answer) + shift) % n]
    return shown, gold


def all_shifts(options: Mapping[str, str], answer: str) -> list[tuple[int, dict[str, str], str]]:
    """Every rotation (shift, shown options, gold), one per option: n shifts for n options."""
    return [(i, *shift_options(options, answer, i)) for i in range(len(options))]


def circular_groups(records: Iterable[Record], key: Callable[[Record], Any] | None = None) -> dict[Any, list[Record]]:
    """Records grouped by base question (and whatever else `key` adds, e.g. the language)."""
    groups: dict[Any, list[Record]] = defaultdict(list)
    for r in records:
        groups[key(r) if key else r.base_id].append(r)
    return dict(groups)


def circular_scores(records: Sequence[Record]) -> tuple[float, bool]:
    """(share of rotations right, all rotations right) for one base question's records."""
    if not records:
        return 0.0, False
    right = sum(1 for r in records if r.correct is True)
    return right / len(records), right == len(records)


def circular_summary(records: Sequence[Record]) -> dict[str, float | int]:
    """Circular metrics over base questions: mean per-question score and the all-right share (%)."""
    groups = circular_groups(records)
    if not groups:
        return {"circular_accuracy": 0.0, "circular_mean": 0.0, "n_questions": 0}
    scores = [circular_scores(g) for g in groups.values()]
    return {
        "circular_accuracy": 100.0 * sum(1 for _, ok in scores if ok) / len(scores),
        "circular_mean": 100.0 * sum(s for s, _ in scores) / len(scores),
        "n_questions": len(scores),
    }
