"""Simulation harness for the stopping rule "stop once the 95 % half-width is at most W points".

Used by tests/metrics/test_confseq_coverage.py (there is no bench/confseq_stopping.py yet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalkit.metrics.analysis.confseq import StratumState, advance

FIRST_LOOK = 50
BLOCK = 256
Z95 = 1.959964


def _urn_block(rng: np.random.Generator, left: np.ndarray, start: int, t: int, n_pop: int) -> np.ndarray:
    """The next t outcomes of each run (rows), drawn without replacement from a 0/1 population.

    Draw i is 1 with probability (ones left) / (items left): exactly the law of a uniformly random
    permutation's prefix, generated only as far as the runs go. `left` is updated in place.
    """
    u = rng.random((t, left.size))
    out = np.empty((t, left.size))
    for k in range(t):
        col = u[k] * (n_pop - start - k) < left
        out[k] = col
        left -= col
    return out.T


@dataclass(frozen=True)
class Stops:
    n: np.ndarray  # items asked at the stop
    low: np.ndarray
    high: np.ndarray


def simulate(p: float, width_points: float, *, n_pop: int, runs: int, seed: int,
             alpha: float = 0.05, tuned: bool = True) -> tuple[float, Stops, Stops]:
    """One cell: a realised population of n_pop items at accuracy p, `runs` seeded random orders.

    Every run looks after each item from FIRST_LOOK on and stops once the half-width is at most
    W points. Returns (truth, the confidence sequence's stops, the fixed-n Wald interval's stops;
    Wald with the finite-population correction).
    """
    rng = np.random.default_rng(seed)
    population = rng.random(n_pop) < p
    ones = int(population.sum())
    truth = ones / n_pop
    target = width_points / 100.0
    res = {m: (np.full(runs, n_pop), np.full(runs, truth), np.full(runs, truth)) for m in ("cs", "wald")}
    done = {m: np.zeros(runs, bool) for m in ("cs", "wald")}
    active = np.arange(runs)
    left = np.full(runs, float(ones))
    s_run = np.zeros(runs)
    state = StratumState()
    start = 0
    while active.size and start < n_pop:
        end = min(start + BLOCK, n_pop)
        x = _urn_block(rng, left[active], start, end - start, n_pop)
        left[active] -= x.sum(axis=1)
        t = np.arange(start + 1, end + 1)[None, :]
        low, high, state = advance(state, x, n_pop, alpha, target if tuned else None)
        s = s_run[active, None] + np.cumsum(x, axis=1)
        s_run[active] = s[:, -1]
        ph = s / t
        half = Z95 * np.sqrt(ph * (1 - ph) / t * (n_pop - t) / (n_pop - 1))
        for m, lo, hi in (("cs", low, high), ("wald", ph - half, ph + half)):
            ok = ((hi - lo) / 2.0 <= target) & (t >= FIRST_LOOK) & ~done[m][active, None]
            hit = ok.any(axis=1)
            j = ok.argmax(axis=1)[hit]
            idx = active[hit]
            res[m][0][idx] = t[0, j]
            res[m][1][idx] = lo[hit, j]
            res[m][2][idx] = hi[hit, j]
            done[m][idx] = True
        keep = ~(done["cs"][active] & done["wald"][active])
        active = active[keep]
        state = StratumState(**{k: getattr(state, k)[keep] for k in state.__dataclass_fields__})
        start = end
    return truth, Stops(*res["cs"]), Stops(*res["wald"])


def coverage(truth: float, stops: Stops) -> float:
    """Share of runs whose interval at the stop contains the truth."""
    return float(np.mean((stops.low <= truth + 1e-12) & (truth - 1e-12 <= stops.high)))
