"""Seeded simulations of the two stopping rules: items asked before `--until-ci W` or a pair's decision.

Why simulate: a time-uniform interval has no closed-form sample size, and the median items at the stop
is what a user pays for; `evalkit plan` and bench/stopping.py quote it, and the coverage tests check
the rule's intervals with the same code (tests/metrics/confseq_harness.py), so all three agree.

`until_ci`: a realised population of N items at accuracy p, asked in a uniformly random order (one
stratum: what a sampled run does, engine/until/order.py; several strata, each interleaved in
proportion to its size and at alpha/H, is the stratified form a merge of shards uses), the
confidence sequence of confseq.py with bets tuned to W,
a look after every item from the first look on; the run stops once the half-width is at most W.
Vectorised over runs with numpy, in blocks, dropping runs as they stop.

`until_decided`: two models whose answers disagree on a share ψ of items, A alone right on (ψ + δ)/2 and
B alone on (ψ - δ)/2; the anytime paired test of sequential_pairs.py with the design `PairState` uses
(its defaults: what `--until-decided` bets on, whatever the truth); a pair is decided once its wealth
reaches 1/α (α/m for the strictest step of Holm over m pairs). Only the discordant items move the
wealth, so the simulation draws those and the gaps between them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalkit.metrics.analysis.confseq import StratumState, advance
from evalkit.metrics.analysis.sequential_pairs import PairState, log_wealth_items

if TYPE_CHECKING:  # numpy is imported where it is used: `import evalkit` stays light
    import numpy as np

FIRST_LOOK = 50  # the first look at the interval, in items (the rule looks after every item from here)
BLOCK = 256  # items simulated per step, for every run still going (times one per 8 strata: each stratum's
# step has a fixed cost, so a benchmark of many small categories takes larger steps)
Z95 = 1.959964


@dataclass(frozen=True)
class Stops:
    """Where each simulated run stopped: items asked and the interval it reported there."""

    n: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class CiSimulation:
    """One simulated cell of `--until-ci`: the truth and each run's stop (and the fixed-n Wald interval's
    stop under the same rule, when asked for: the coverage tests show it failing)."""

    truth: float
    stops: Stops
    wald: Stops | None

    def median(self) -> int:
        """Median items at the stop, rounded up (a plan should not fall short by a fraction)."""
        import numpy as np
        return math.ceil(float(np.median(self.stops.n)))


def interleave(sizes: Mapping[str, int]) -> tuple[list[str], np.ndarray]:
    """The strata's names and, for each position of the stratified order, the index of its stratum: the
    k-th item of a stratum of N_h sits at (k + 1/2) / N_h of the way, ties in the strata's name order, as
    a sampled run places its variant groups (evalkit/engine/until/order.py), so every prefix holds each
    stratum in proportion to its size (to within one item)."""
    import numpy as np

    names = sorted(sizes)
    counts = np.array([int(sizes[n]) for n in names])
    which = np.repeat(np.arange(len(names)), counts)
    k = np.concatenate([np.arange(c) for c in counts]) if len(counts) else np.zeros(0)
    where = (k + 0.5) / counts[which]
    return names, which[np.lexsort((which, where))]


def _urn_block(rng: np.random.Generator, left: np.ndarray, seen: int, t: int, size: int) -> np.ndarray:
    """The next t outcomes of each run (rows) drawn without replacement from a stratum of `size` 0/1 items
    of which `left` (per run) ones are not drawn yet, `seen` drawn so far: draw i is 1 with probability
    (ones left) / (items left), the law of a uniformly random permutation's prefix. `left` is updated."""
    import numpy as np

    u = rng.random((t, left.size))
    out = np.empty((t, left.size))
    for k in range(t):
        col = u[k] * (size - seen - k) < left
        out[k] = col
        left -= col
    return out.T


def until_ci(p: float, width: float, *, sizes: Mapping[str, int] | int, runs: int, seed: int,
             alpha: float = 0.05, tuned: bool = True, first_look: int = FIRST_LOOK,
             wald: bool = False) -> CiSimulation:
    """`runs` seeded runs of `--until-ci` at half-width `width` (a fraction: 0.02 for ±2 points) on a
    benchmark of `sizes` (items per category, or one number: a single stratum) at accuracy `p`.

    `tuned` False: the all-times bets (no target). `wald`: also the stop of a fixed-n Wald interval with
    the finite-population correction checked by the same rule (over the pooled items)."""
    import numpy as np

    strata = {"": int(sizes)} if isinstance(sizes, int) else {k: int(v) for k, v in sizes.items() if int(v) > 0}
    if not strata or not 0.0 < p < 1.0 or width <= 0:
        raise ValueError(f"need items, 0 < p < 1 and a positive width (got p={p}, width={width})")
    rng = np.random.default_rng(seed)
    names, order = interleave(strata)
    n_pop = int(order.size)
    h = len(names)
    size = np.array([strata[n] for n in names])
    weight = size / n_pop
    ones = rng.binomial(size, p)
    truth = float(ones.sum() / n_pop)
    alpha_h = alpha / h
    target = width if tuned else None
    # position t (0-based) -> items of its stratum seen before it
    seen_at = np.zeros((h, n_pop + 1), dtype=np.int64)
    for j in range(h):
        seen_at[j, 1:] = np.cumsum(order == j)
    res = {m: (np.full(runs, n_pop), np.full(runs, truth), np.full(runs, truth)) for m in ("cs", "wald")}
    done = {"cs": np.zeros(runs, bool), "wald": np.zeros(runs, bool) if wald else np.ones(runs, bool)}
    active = np.arange(runs)
    left = np.tile(ones.astype(float), (runs, 1))  # ones not drawn yet, per run and stratum
    states = [StratumState() for _ in range(h)]
    s_run = np.zeros(runs)
    start = 0
    block = BLOCK * max(1, h // 8)
    while active.size and start < n_pop:
        end = min(start + block, n_pop)
        t = np.arange(start + 1, end + 1)
        here = order[start:end]
        # the overall bounds move only with the stratum of each position: sum its weighted steps
        d_low = np.zeros((active.size, end - start))
        d_high = np.zeros((active.size, end - start))
        x_all = np.zeros((active.size, end - start))
        base_low = np.zeros(active.size)
        base_high = np.zeros(active.size)
        for j in range(h):
            st = states[j]
            prev_lo = np.broadcast_to(np.asarray(st.low, float), (active.size,))
            prev_hi = np.broadcast_to(np.asarray(st.high, float), (active.size,))
            base_low += weight[j] * prev_lo
            base_high += weight[j] * prev_hi
            k0, k1 = int(seen_at[j, start]), int(seen_at[j, end])
            if k1 == k0:
                continue
            lj = left[active, j]
            x = _urn_block(rng, lj, k0, k1 - k0, int(size[j]))
            left[active, j] = lj
            lo_j, hi_j, states[j] = advance(st, x, int(size[j]), alpha_h, target)
            cols = here == j
            x_all[:, cols] = x
            d_low[:, cols] = weight[j] * np.diff(np.concatenate([prev_lo[:, None], lo_j], axis=1), axis=1)
            d_high[:, cols] = weight[j] * np.diff(np.concatenate([prev_hi[:, None], hi_j], axis=1), axis=1)
        low = base_low[:, None] + np.cumsum(d_low, axis=1)
        high = base_high[:, None] + np.cumsum(d_high, axis=1)
        s = s_run[active, None] + np.cumsum(x_all, axis=1)
        s_run[active] = s[:, -1]
        ph = s / t
        half = Z95 * np.sqrt(ph * (1 - ph) / t * (n_pop - t) / max(1, n_pop - 1))
        for m, lo, hi in (("cs", low, high), ("wald", ph - half, ph + half)):
            if m == "wald" and not wald:
                continue
            ok = ((hi - lo) / 2.0 <= width + 1e-12) & (t >= first_look)[None, :] & ~done[m][active, None]
            hit = ok.any(axis=1)
            j = ok.argmax(axis=1)[hit]
            idx = active[hit]
            res[m][0][idx] = t[j]
            res[m][1][idx] = lo[hit, j]
            res[m][2][idx] = hi[hit, j]
            done[m][idx] = True
        keep = ~(done["cs"][active] & done["wald"][active])
        active = active[keep]
        states = [StratumState(**{f: _rows(getattr(st, f), keep) for f in st.__dataclass_fields__}) for st in states]
        start = end
    return CiSimulation(truth, Stops(*res["cs"]), Stops(*res["wald"]) if wald else None)


def _rows(value: object, keep: np.ndarray) -> object:
    """A stratum state's field for the runs kept (a scalar: a stratum not reached yet, the same for all)."""
    import numpy as np
    arr = np.asarray(value)
    return arr[keep] if arr.ndim else value


def coverage(truth: float, stops: Stops) -> float:
    """Share of runs whose interval at the stop contains the truth."""
    import numpy as np
    return float(np.mean((stops.low <= truth + 1e-12) & (truth - 1e-12 <= stops.high)))


@dataclass(frozen=True)
class PairSimulation:
    """Items at which each simulated pair was decided (inf: not by the cap)."""

    stops: np.ndarray
    cap: int

    def decided_share(self) -> float:
        import numpy as np
        return float(np.mean(np.isfinite(self.stops)))

    def quantile(self, q: float) -> int | None:
        """Items by which a share q of runs were decided, rounded up; None: fewer than q by the cap."""
        import numpy as np
        v = float(np.quantile(self.stops, q, method="higher"))
        return math.ceil(v) if math.isfinite(v) else None


def _design_default(name: str) -> float:
    return float(PairState.__dataclass_fields__[name].default)


def until_decided(effect: float, discordance: float, *, runs: int, seed: int, cap: int, alpha: float = 0.05,
                  pairs: int = 1, chunk: int = 100, design: tuple[float, float] | None = None) -> PairSimulation:
    """`runs` seeded paired runs at difference δ = `effect` and discordance ψ (fractions), capped at `cap`
    items; a pair is decided when its anytime p-value is at most α / `pairs` (Holm's strictest step).
    `design`: the (δ, ψ) the test's mixture bets on; default `PairState`'s, what a run uses."""
    import numpy as np

    if not 0.0 < abs(effect) <= discordance <= 1.0:
        raise ValueError(f"need 0 < |effect| <= discordance <= 1, got effect={effect}, discordance={discordance}")
    d_effect, d_disc = design or (_design_default("effect"), _design_default("discordance"))
    rng = np.random.default_rng(seed)
    q = 0.5 + abs(effect) / (2 * discordance)  # P(A alone right | they disagree)
    # discordant items by the cap: ψ·cap on average; draw enough for (almost) every run, then cut at the cap
    k = max(8, int(discordance * cap + 6 * math.sqrt(cap * discordance * (1 - discordance)) + 8))
    threshold = math.log(pairs / alpha)
    stops = np.full(runs, np.inf)
    for lo in range(0, runs, chunk):
        r = min(chunk, runs - lo)
        a_alone = rng.random((r, k)) < q
        item = np.cumsum(rng.geometric(discordance, (r, k)), axis=1)  # the item each disagreement falls on
        wealth = log_wealth_items(a_alone, ~a_alone, effect=d_effect, discordance=d_disc)
        hit = (wealth >= threshold) & (item <= cap)
        first = hit.argmax(axis=1)
        got = hit.any(axis=1)
        stops[lo:lo + r][got] = item[got, first[got]]
    return PairSimulation(stops, cap)
