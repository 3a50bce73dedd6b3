"""What the reports draw, computed from one run's records: pure functions, no I/O.

Per category and per variant accuracy (record level, with Wilson intervals), the
wrong-choice confusion of letter answers, the share of option E (MME-RealWorld's
"the image does not feature" trap) and the reliability decomposition of variant groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.analysis.significance import wilson
from evalkit.core.types import Record
from evalkit.metrics.reliability import reliability_summary


@dataclass(frozen=True)
class Rate:
    """k right of n, as a percentage with its 95% Wilson interval."""

    k: int
    n: int

    @property
    def pct(self) -> float:
        return 100.0 * self.k / self.n if self.n else 0.0

    @property
    def ci(self) -> tuple[float, float]:
        lo, hi = wilson(self.k, self.n)
        return 100.0 * lo, 100.0 * hi

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.ci
        return {"pct": self.pct, "k": self.k, "n": self.n, "ci": [lo, hi]}


def _rates(records: Sequence[Record], key) -> dict[str, Rate]:
    right: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for r in records:
        for name in key(r):
            total[name] += 1
            right[name] += r.correct is True
    return {name: Rate(right[name], total[name]) for name in sorted(total)}


def per_category(records: Sequence[Record]) -> dict[str, Rate]:
    """Accuracy per category (skill, dimension, task); empty when records carry none."""
    return _rates(records, lambda r: (r.category,) if r.category else ())


def variant_label(key: str, value: Any) -> str:
    return f"{key}={value}"


def per_variant(records: Sequence[Record]) -> dict[str, Rate]:
    """Accuracy per value of each variant key (shift=1, rot=90, lang=cn); empty without variants."""
    rates = _rates(records, lambda r: tuple(variant_label(k, v) for k, v in sorted(r.variant.items())))
    return dict(sorted(rates.items(), key=lambda kv: _variant_sort_key(kv[0])))


def _variant_sort_key(label: str) -> tuple[str, float, str]:
    key, _, value = label.partition("=")
    try:
        return (key, float(value), "")
    except ValueError:
        return (key, 0.0, value)


def is_letter(value: str | None) -> bool:
    return value is not None and len(value) == 1 and value.isupper() and value.isalpha()


def confusion(records: Sequence[Record]) -> tuple[list[str], list[list[int]]] | None:
    """Wrong letter answers: rows = gold letter, columns = chosen letter. None unless answers are letters."""
    parsed = [r for r in records if r.parsed is not None]
    if not parsed or not all(is_letter(r.parsed) and is_letter(r.gold) for r in parsed):
        return None
    letters = sorted({r.gold for r in parsed} | {r.parsed for r in parsed if r.parsed})
    index = {c: i for i, c in enumerate(letters)}
    matrix = [[0] * len(letters) for _ in letters]
    for r in parsed:
        if r.parsed != r.gold:
            matrix[index[r.gold]][index[r.parsed]] += 1  # type: ignore[index]
    return letters, matrix


def e_rate(records: Sequence[Record], letter: str = "E") -> dict[str, float] | None:
    """Share (%) of parsed answers choosing `letter`, and of golds that are it; None if it never occurs."""
    parsed = [r for r in records if r.parsed is not None]
    if not parsed or not any(r.gold == letter or r.parsed == letter for r in records):
        return None
    return {"answered": 100.0 * sum(r.parsed == letter for r in parsed) / len(parsed),
            "gold": 100.0 * sum(r.gold == letter for r in records) / len(records)}


def reliability(records: Sequence[Record], *, n_boot: int = 200, seed: int = 0) -> dict[str, Any] | None:
    """RE/VE/MA and θ, r, g (paper solution and ML fit) over variant groups of 3 or more; else None."""
    if not any(r.variant for r in records):
        return None
    return reliability_summary(records, n_boot=n_boot, seed=seed)
