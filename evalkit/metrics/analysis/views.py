"""What the reports draw, computed from one run's records: pure functions, no I/O.

Per category and per variant accuracy (record level; 95% intervals from a bootstrap that
resamples items with all their variants, as the headline's does, or Wilson's with one answer per
item), the wrong-choice confusion of letter answers over the options' letters, the share of
option E (MME-RealWorld's "the image does not feature" trap) and the reliability decomposition
of variant groups.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.record import Record
from evalkit.metrics.analysis.significance import bootstrap_weights, wilson
from evalkit.metrics.reliability import reliability_summary

N_BOOT = 2000


@dataclass(frozen=True)
class Rate:
    """k right of n, as a percentage with its 95% interval.

    lo/hi: the clustered bootstrap interval (%); None (no resampling asked, or one answer per item)
    falls back to Wilson's, which treats every record as independent."""

    k: int
    n: int
    lo: float | None = None
    hi: float | None = None

    @property
    def pct(self) -> float:
        return 100.0 * self.k / self.n if self.n else 0.0

    @property
    def ci(self) -> tuple[float, float]:
        if self.lo is not None and self.hi is not None:
            return self.lo, self.hi
        lo, hi = wilson(self.k, self.n)
        return 100.0 * lo, 100.0 * hi

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.ci
        return {"pct": self.pct, "k": self.k, "n": self.n, "ci": [lo, hi]}


def clustered_intervals(units: Sequence[str], cells: Sequence[str], right: Sequence[bool], *,
                        n_boot: int = N_BOOT, seed: int = 0) -> dict[str, tuple[float, float]]:
    """95% percentile interval (%) of each cell's accuracy, resampling units (items) with replacement:
    every observation of a drawn unit comes along, so an item's variants (shifts, rotations,
    languages) move together and do not count as independent evidence. One resample serves all cells.

    Empty (the caller's Rate falls back to Wilson's interval) when no item has two observations in
    one cell: resampling items is then resampling answers, which Wilson's interval does exactly and
    at no cost (a full MME-RealWorld run would otherwise spend a second here)."""
    if n_boot <= 0 or not units or len(set(zip(units, cells, strict=True))) == len(units):
        return {}
    import numpy as np

    unit_order = sorted(set(units))
    cell_order = sorted(set(cells))
    ui = {u: i for i, u in enumerate(unit_order)}
    ci = {c: j for j, c in enumerate(cell_order)}
    rows = np.array([ui[u] for u in units], dtype=int)
    cols = np.array([ci[c] for c in cells], dtype=int)
    sums = np.zeros((len(unit_order), len(cell_order)))
    counts = np.zeros_like(sums)
    np.add.at(sums, (rows, cols), np.asarray(right, dtype=float))
    np.add.at(counts, (rows, cols), 1.0)
    draws = []
    for w in bootstrap_weights(len(unit_order), n_boot, np.random.default_rng(seed)):
        s, c = w @ sums, w @ counts
        draws.append(np.where(c > 0, s / np.where(c > 0, c, 1.0), np.nan))
    with warnings.catch_warnings():  # a cell none of whose units was drawn is left out of that resample
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanquantile(np.vstack(draws), [0.025, 0.975], axis=0) * 100.0
    return {c: (float(lo[j]), float(hi[j])) for j, c in enumerate(cell_order)}


def _rates(records: Sequence[Record], key: Callable[[Record], Sequence[str]], n_boot: int,
           seed: int) -> dict[str, Rate]:
    right: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    units: list[str] = []
    cells: list[str] = []
    oks: list[bool] = []
    for r in records:
        for name in key(r):
            total[name] += 1
            right[name] += r.correct is True
            units.append(r.base_id)
            cells.append(name)
            oks.append(r.correct is True)
    bounds = clustered_intervals(units, cells, oks, n_boot=n_boot, seed=seed)
    return {name: Rate(right[name], total[name], *bounds.get(name, (None, None))) for name in sorted(total)}


def per_category(records: Sequence[Record], *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Rate]:
    """Accuracy per category (skill, dimension, task); empty when records carry none."""
    return _rates(records, lambda r: (r.category,) if r.category else (), n_boot, seed)


def _variant_label(key: str, value: Any) -> str:
    return f"{key}={value}"


def per_variant(records: Sequence[Record], *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Rate]:
    """Accuracy per value of each variant key (shift=1, rot=90, lang=cn); empty without variants."""
    rates = _rates(records, lambda r: tuple(_variant_label(k, v) for k, v in sorted(r.variant.items())),
                   n_boot, seed)
    return dict(sorted(rates.items(), key=lambda kv: _variant_sort_key(kv[0])))


def _variant_sort_key(label: str) -> tuple[str, float, str]:
    key, _, value = label.partition("=")
    try:
        return (key, float(value), "")
    except ValueError:
        return (key, 0.0, value)


def is_letter(value: str | None) -> bool:
    return value is not None and len(value) == 1 and value.isupper() and value.isalpha()


@dataclass(frozen=True)
class Confusion:
    """Wrong answers by (gold letter, chosen letter) over the benchmark's option letters, and per gold
    letter the wrong answers that chose none of them (an extractor's "no option" token such as
    IF-Bench's "F", or no letter at all)."""

    letters: list[str]
    wrong: list[list[int]]
    other: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"letters": self.letters, "wrong": self.wrong, "other": self.other}


def option_letters(records: Sequence[Record]) -> list[str]:
    """The options' letters, as far as records tell (they do not carry the options): options run A, B,
    C... so every letter up to the last gold one is an option, and so is each next letter while some
    answer chose it (MME-RealWorld's E is rarely gold but often chosen). A token after a gap, such as
    the "F" IF-Bench's extractor writes for "no option" after A-D, is not an option."""
    golds = {r.gold for r in records if is_letter(r.gold)}
    if not golds:
        return []
    chosen = {r.parsed for r in records if is_letter(r.parsed)}
    letters = [chr(c) for c in range(ord("A"), ord(max(golds)) + 1)]
    while chr(ord(letters[-1]) + 1) in chosen and letters[-1] < "Z":
        letters.append(chr(ord(letters[-1]) + 1))
    return letters


def confusion(records: Sequence[Record]) -> Confusion | None:
    """Wrong answers: rows = gold letter, columns = chosen letter; answers outside the option letters
    (failed queries excepted) are counted per row in `other`. None unless golds are letters and some
    answer was read."""
    answered = [r for r in records if not r.error]
    if not any(r.parsed is not None for r in answered) or not all(is_letter(r.gold) for r in answered):
        return None
    letters = option_letters(answered)
    index = {c: i for i, c in enumerate(letters)}
    matrix = [[0] * len(letters) for _ in letters]
    other = [0] * len(letters)
    for r in answered:
        if r.parsed == r.gold or r.gold not in index:
            continue
        if r.parsed in index:
            matrix[index[r.gold]][index[r.parsed]] += 1  # type: ignore[index]
        else:
            other[index[r.gold]] += 1
    return Confusion(letters, matrix, other)


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
