"""Confidence intervals and paired tests between models on the same items.

Pure functions over ScoreTables, seeded so a report is reproducible: a percentile
bootstrap over items for each model's headline number, and for each pair of models the
exact McNemar test on per-observation correctness (when scores are right/wrong) and a
paired bootstrap of the score difference (always), Holm-corrected across pairs. Scores that
are means over repeats (fractions per item) are tested by the paired bootstrap alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalkit.metrics import fit_store
from evalkit.metrics.analysis.binom_test import binom_two_sided
from evalkit.metrics.analysis.scoretable import ScoreTable, is_array

if TYPE_CHECKING:  # numpy and scipy are imported where used: scipy.stats takes seconds to import
    import numpy as np

CHUNK = 250  # bootstrap rows per matrix product: bounds memory on very large benchmarks


@dataclass(frozen=True)
class Interval:
    estimate: float
    lo: float
    hi: float

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


@dataclass(frozen=True)
class McNemar:
    only_a: int     # observations right for A and wrong for B
    only_b: int
    p: float


@dataclass(frozen=True)
class PairTest:
    a: str
    b: str
    n_common: int
    diff: Interval                 # score(A) - score(B) with its paired-bootstrap interval
    p_bootstrap: float
    mcnemar: McNemar | None        # None when scores are not right/wrong
    p_holm: float = 1.0            # the adjusted p of the test that decides (McNemar if any)
    significant: bool = False

    @property
    def p(self) -> float:
        return self.mcnemar.p if self.mcnemar is not None else self.p_bootstrap


def bootstrap_weights(n_units: int, n_boot: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Bootstrap counts per unit (each row sums to n_units), in chunks to bound memory."""
    import numpy as np

    done = 0
    while done < n_boot:
        size = min(CHUNK, n_boot - done)
        picks = rng.integers(0, n_units, size=(size, n_units)) + (np.arange(size) * n_units)[:, None]
        yield np.bincount(picks.ravel(), minlength=size * n_units).reshape(size, n_units).astype(float)
        done += size


def resample(tables: Mapping[str, ScoreTable], *, n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """Each table's metric under the same n_boot resamples of the union of their units.

    Shared resamples make paired differences paired; each table's unit x cell matrices are
    built once, so a resample costs one matrix product per table.
    """
    import numpy as np

    units = sorted(set().union(*(t.units for t in tables.values())))
    prepared = {name: (t.matrices(units), t) for name, t in tables.items()}
    out: dict[str, list[np.ndarray]] = {name: [] for name in tables}
    rng = np.random.default_rng(seed)
    for w in bootstrap_weights(len(units), n_boot, rng):
        for name, ((sums, counts), t) in prepared.items():
            out[name].append(t.from_matrices(sums, counts, w))
    return {name: np.concatenate(v) for name, v in out.items()}


def _interval(point: float, draws: np.ndarray, level: float) -> Interval:
    import numpy as np

    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return Interval(point, float(lo), float(hi))


def bootstrap_ci(table: ScoreTable, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                 draws: np.ndarray | None = None) -> Interval:
    """Percentile interval of the headline metric, resampling items with replacement.

    `draws`: this table's resampled metric when already computed (see `resample`)."""
    point = table.estimate()
    if draws is None and (not table.n or n_boot <= 0):
        return Interval(point, point, point)
    if draws is not None:
        return _interval(point, draws, level)
    store = fit_store.shared()  # the cache folder's kept intervals, when the engine opened them
    inputs = (*_table_inputs(table), n_boot, seed, level) if store is not None else ()
    kept = store.get(inputs) if store is not None else None
    if kept is not None:
        try:
            return Interval(point, float(kept["lo"]), float(kept["hi"]))
        except (TypeError, ValueError, KeyError):
            pass  # a damaged entry: computed again
    interval = _interval(point, resample({"t": table}, n_boot=n_boot, seed=seed)["t"], level)
    if store is not None:
        store.put(inputs, {"lo": interval.lo, "hi": interval.hi})
    return interval


def _table_inputs(table: ScoreTable) -> tuple[str, str]:
    """The table's kind and a sha256 of every field it resamples from (a headline interval is a pure
    function of them, the resample count, seed and level)."""
    digest = hashlib.sha256()
    for f in dataclasses.fields(table):
        value = getattr(table, f.name)
        if is_array(value):  # (a plain tuple of answers is hashed as JSON: numpy stays unimported)
            digest.update(f"{f.name}:{value.dtype}:{value.shape}:".encode() + value.tobytes())
        else:
            digest.update(f"{f.name}:{json.dumps(value, default=repr, ensure_ascii=False)};".encode())
    return type(table).__qualname__, digest.hexdigest()


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p: the discordant pairs as a fair-coin binomial."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    return binom_two_sided(min(only_a, only_b), n, 0.5)


def discordant(a: ScoreTable, b: ScoreTable) -> tuple[int, int]:
    """(right only for A, right only for B) over the observations both have."""
    va = dict(zip(a.keys, a.values, strict=True))
    vb = dict(zip(b.keys, b.values, strict=True))
    common = va.keys() & vb.keys()
    return (sum(1 for k in common if va[k] == 1 and vb[k] == 0),
            sum(1 for k in common if va[k] == 0 and vb[k] == 1))


def paired_test(name_a: str, a: ScoreTable, name_b: str, b: ScoreTable, *, n_boot: int = 2000, seed: int = 0,
                level: float = 0.95, draws: Mapping[str, np.ndarray] | None = None) -> PairTest:
    """A vs B on the observations both answered: McNemar (right/wrong scores) and a paired bootstrap.

    `draws`: resampled metrics of both (from `resample`) when they cover the same observations.
    """
    import numpy as np

    common = set(a.keys) & set(b.keys)
    if len(common) < max(len(a.keys), len(b.keys)):
        a, b, draws = a.restrict(common), b.restrict(common), None
    diff = a.estimate() - b.estimate()
    if common and n_boot > 0:
        if draws is None:
            draws = resample({name_a: a, name_b: b}, n_boot=n_boot, seed=seed)
        delta = draws[name_a] - draws[name_b]
        interval = _interval(diff, delta, level)
        p_boot = float(min(1.0, 2 * min(np.mean(delta <= 0), np.mean(delta >= 0))))
    else:
        interval, p_boot = Interval(diff, diff, diff), 1.0
    test = None
    if a.binary and b.binary:
        only_a, only_b = discordant(a, b)
        test = McNemar(only_a, only_b, mcnemar_exact(only_a, only_b))
    return PairTest(name_a, name_b, len(common), interval, p_boot, test)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (monotone, capped at 1), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def same_observations(tables: Mapping[str, ScoreTable]) -> bool:
    """Whether every table has the same observations (then one set of resamples serves all)."""
    return len({frozenset(t.keys) for t in tables.values()}) == 1


def all_pairs(tables: dict[str, ScoreTable], *, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05,
              level: float = 0.95, draws: Mapping[str, np.ndarray] | None = None) -> list[PairTest]:
    """Every pair of models (in the given order), Holm-corrected across the pairs.

    `draws`: `resample(tables)` when already computed (it is only used if all tables have the
    same observations).
    """
    names = list(tables)
    if not same_observations(tables):
        draws = None
    elif draws is None and n_boot > 0 and len(names) > 1:
        draws = resample(tables, n_boot=n_boot, seed=seed)
    tests = [paired_test(x, tables[x], y, tables[y], n_boot=n_boot, seed=seed, level=level, draws=draws)
             for i, x in enumerate(names) for y in names[i + 1:]]
    adjusted = holm([t.p for t in tests])
    return [PairTest(t.a, t.b, t.n_common, t.diff, t.p_bootstrap, t.mcnemar, p_holm=p, significant=p < alpha)
            for t, p in zip(tests, adjusted, strict=True)]


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for k right of n, as fractions (for per-category bars). math.sqrt, as
    numpy's, is the correctly rounded root: the same numbers, numpy not imported for them."""
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (float(max(0.0, centre - half)), float(min(1.0, centre + half)))
