"""A run's headline metric as observations, so it can be resampled without re-aggregating.

Every benchmark's headline number is a mean of per-observation scores, either plain
(accuracy) or macro (the mean over cells such as skills or language x dimension of the
mean within each cell). A ScoreTable holds those observations with the unit they are
resampled by (the item, so all its variants travel together), which turns a bootstrap
into two matrix products instead of thousands of calls to the benchmark's aggregate.

With repeated sampling (`--repeats`), `mean_over_repeats` averages each observation over the
repeats: the cells become fractions (per-item mean correctness), still resampled by item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where used, so benchmarks load without it
    import numpy as np


@dataclass(frozen=True)
class ScoreTable:
    """Observations of one run. `estimate()` must equal summary["metrics"][metric].

    `observed` may be a plain sequence: a table of right-or-wrong answers then gives its estimate
    without numpy (a re-run whose intervals the cache folder kept never imports it); `values` is
    the array every resampling reads."""

    metric: str                       # the headline metric's name in the official table
    units: tuple[str, ...]            # resampling unit (item) of each observation
    observed: Sequence[float] | np.ndarray  # each observation's score in [0, 1]
    strata: tuple[str, ...] | None = None  # macro cells; None for a plain mean
    scale: float = 100.0              # 100 for percentages, 1 for fractions
    keys: tuple[str, ...] = field(default=())  # pairing key per observation (default unit|stratum)
    repeats: int = 1                  # how many repeats each value is the mean of

    def __post_init__(self) -> None:
        if not is_array(self.observed):
            object.__setattr__(self, "observed", tuple(float(v) for v in self.observed))
        n = len(self.observed)
        if len(self.units) != n or (self.strata is not None and len(self.strata) != n):
            raise ValueError("units, values and strata must have one entry per observation")
        if not self.keys:
            strata = self.strata or ("",) * n
            object.__setattr__(self, "keys", tuple(f"{u}|{s}" for u, s in zip(self.units, strata, strict=True)))

    @cached_property
    def values(self) -> np.ndarray:
        """The observations as a float array (what resampling reads)."""
        import numpy as np

        return np.asarray(self.observed, dtype=float)

    @classmethod
    def plain(cls, metric: str, units: Sequence[str], values: Sequence[float], *, scale: float = 100.0,
              strata: Sequence[str] | None = None) -> ScoreTable:
        import numpy as np

        return cls(metric, tuple(units), np.asarray(values, dtype=float),
                   tuple(strata) if strata is not None else None, scale)

    @property
    def n(self) -> int:
        return len(self.observed)

    @property
    def binary(self) -> bool:
        """Whether every observation is one right-or-wrong answer (what McNemar's test needs); a mean
        over repeats is not, even where every repeat agrees (one test for all pairs of a comparison)."""
        if self.repeats != 1:
            return False
        if not is_array(self.observed):
            return all(v == 0.0 or v == 1.0 for v in self.observed)
        import numpy as np

        return bool(np.all((self.values == 0) | (self.values == 1)))

    def estimate(self) -> float:
        return self._point

    @cached_property
    def _point(self) -> float:
        """Computed once: intervals and every pair test of a comparison ask for it again. A plain mean
        of right-or-wrong answers is counted without numpy: the same sums (whole numbers, exact in
        floating point either way), the same division."""
        if self.strata is None and self.n and self.binary:
            return float(sum(self.observed) / self.n * self.scale)
        import numpy as np

        units = sorted(set(self.units))
        return float(_estimate(*self.matrices(units), np.ones((1, len(units))), self.strata is not None)[0]
                     * self.scale)

    def restrict(self, keys: set[str]) -> ScoreTable:
        """Only the observations whose pairing key is in `keys` (the items every model answered)."""
        keep = [i for i, k in enumerate(self.keys) if k in keys]
        return ScoreTable(self.metric, tuple(self.units[i] for i in keep), self.values[keep],
                          tuple(self.strata[i] for i in keep) if self.strata is not None else None,
                          self.scale, tuple(self.keys[i] for i in keep), self.repeats)

    def matrices(self, unit_order: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(sums, counts): units x cells, so any weighting of units gives every cell's mean."""
        import numpy as np

        unit_index = {u: i for i, u in enumerate(unit_order)}
        cells = sorted(set(self.strata)) if self.strata is not None else [""]
        cell_index = {c: j for j, c in enumerate(cells)}
        sums = np.zeros((len(unit_order), len(cells)))
        counts = np.zeros_like(sums)
        rows = np.array([unit_index[u] for u in self.units], dtype=int)
        cols = np.array([cell_index[s] for s in self.strata], dtype=int) if self.strata is not None \
            else np.zeros(len(rows), dtype=int)
        np.add.at(sums, (rows, cols), self.values)
        np.add.at(counts, (rows, cols), 1.0)
        return sums, counts

    def resampled(self, weights: np.ndarray, unit_order: Sequence[str]) -> np.ndarray:
        """The metric under each row of unit weights (bootstrap counts), in the table's scale."""
        return self.from_matrices(*self.matrices(unit_order), weights)

    def from_matrices(self, sums: np.ndarray, counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """`resampled` with this table's matrices already built (they cost more than the product)."""
        return _estimate(sums, counts, weights, self.strata is not None) * self.scale


def mean_over_repeats(tables: Sequence[ScoreTable]) -> ScoreTable:
    """One table whose value per observation is its mean over the repeats' tables (per-item mean
    correctness), observations matched by pairing key (the n-th of a key with the n-th). Each repeat's
    table must key its observations as repeat 0's does. An observation some repeat lacks (not answered
    yet) is averaged over the repeats that have it. With every repeat complete, `estimate()` is the
    mean of the repeats' estimates (each cell's mean is linear in the values, with equal counts)."""
    import numpy as np

    if not tables:
        raise ValueError("no tables to average")
    first = tables[0]
    where: dict[tuple[str, int], int] = {}   # (key, occurrence) -> observation of the mean table
    units: list[str] = []
    strata: list[str] = []
    keys: list[str] = []
    sums: list[float] = []
    counts: list[int] = []
    for table in tables:
        seen: dict[str, int] = {}
        for i, key in enumerate(table.keys):
            nth = seen[key] = seen.get(key, -1) + 1
            j = where.setdefault((key, nth), len(keys))
            if j == len(keys):
                units.append(table.units[i])
                strata.append(table.strata[i] if table.strata is not None else "")
                keys.append(key)
                sums.append(0.0)
                counts.append(0)
            sums[j] += float(table.values[i])
            counts[j] += 1
    return ScoreTable(first.metric, tuple(units), np.array(sums) / np.array(counts, dtype=float),
                      tuple(strata) if first.strata is not None else None, first.scale, tuple(keys),
                      len(tables))


def _estimate(sums: np.ndarray, counts: np.ndarray, weights: np.ndarray, macro: bool) -> np.ndarray:
    import numpy as np

    s = weights @ sums
    c = weights @ counts
    if not macro:
        total = c.sum(axis=1)
        return np.divide(s.sum(axis=1), total, out=np.zeros(len(total)), where=total > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cell_means = np.where(c > 0, s / np.where(c > 0, c, 1), np.nan)
    present = ~np.isnan(cell_means)
    n_cells = present.sum(axis=1)
    return np.divide(np.nansum(cell_means, axis=1), n_cells, out=np.zeros(len(n_cells)), where=n_cells > 0)


def is_array(values: object) -> bool:
    """Whether `values` is a numpy array (told apart without importing numpy)."""
    return type(values).__module__ == "numpy" and hasattr(values, "dtype")
