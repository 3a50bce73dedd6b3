"""A time-uniform confidence sequence for a benchmark's accuracy, sampled without replacement by stratum.

Why: a run that stops asking once its interval is narrow enough (and may later be continued with a
smaller width) needs an interval that stays valid at *every* look, not at one fixed n; a fixed-n Wald
interval checked after every item covers far less than 95 % (tests/metrics/test_confseq_coverage.py).

Construction (read 2026-11-29): Waudby-Smith & Ramdas, "Confidence sequences for sampling without
replacement" (NeurIPS 2020, arXiv 2006.04347), the predictable-plug-in empirical-Bernstein CS for
sampling without replacement, and "Estimating means of bounded random variables by betting"
(JRSS-B 2023, arXiv 2010.09686) for the choice of the bets. Within one stratum of N values in [0, 1]
drawn in random order, the conditional mean of draw i given the past is
mu_i(m) = (N m - S_{i-1}) / (N - i + 1) for the stratum mean m, so for predictable lambda_i in [0, 1)
    exp(sum_i lambda_i (X_i - mu_i(m)) - sum_i psi_E(lambda_i) (X_i - muhat_{i-1})^2),
    psi_E(l) = -log(1 - l) - l,
is a nonnegative supermartingale (Fan et al.'s inequality; Howard et al. 2021 for the predictable
centring muhat). Ville's inequality on it and on its mirror image gives, with probability >= 1 - alpha
at all times simultaneously, m in center +- (log(2/alpha) + V) / B, where
    A = sum lambda_i (X_i + S_{i-1} / (N - i + 1)),  B = sum lambda_i N / (N - i + 1),  center = A / B,
    V = sum psi_E(lambda_i) (X_i - muhat_{i-1})^2.
Bets lambda_i: WSR's all-times choice, or, when the run has a target half-width W, lambda_i =
W / sigmahat^2_{i-1} (see `advance`), which needs about 2x fewer items to reach W.
The interval is intersected with what the values seen so far force: S/N <= m <= (S + N - n)/N, which
makes it exact (width 0) once the whole stratum is seen.

Strata: each stratum gets a CS at alpha / H (union bound over the H strata) and the overall mean
sum_h (N_h / N) m_h is bounded by the weighted bounds. That costs a larger log term (log(2H/alpha)
instead of log(2/alpha)) but is valid for any order in which strata are visited, including one that
depends on the answers so far. `ConfSeq` intersects its running intervals (still valid: the CS holds
at all times at once), so its intervals are nested; `interval` returns the intersection too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

#: the largest bet (WSR's truncation c); below 1 so psi_E stays finite.
MAX_BET = 0.5


@dataclass(frozen=True)
class StratumState:
    """Running sums of one stratum's CS, vectorised over runs when the fields are numpy arrays."""

    n: Any = 0  # items seen
    s: Any = 0.0  # sum of outcomes
    mu_hat: Any = 0.5  # predictable mean estimate (muhat_{n})
    sq: Any = 0.25  # 1/4 + sum (X_i - muhat_i)^2
    a: Any = 0.0
    b: Any = 0.0
    v: Any = 0.0
    low: Any = 0.0  # running intersection
    high: Any = 1.0


def _log_term(alpha: float) -> float:
    return math.log(2.0 / alpha)


def advance(state: StratumState, x: Any, size: int, alpha: float,
            target: float | None = None) -> tuple[Any, Any, StratumState]:
    """Feed a block of outcomes (shape runs x t, values in [0, 1]) and return every prefix's bounds.

    Bets: without `target`, WSR's all-times choice lambda_i = sqrt(2 log(2/alpha) / (sigmahat^2 i
    log(1 + i))); with a target half-width W, the bet that minimises the half-width at the horizon
    where it would reach W, lambda_i = W / sigmahat^2_{i-1} (constant-bet optimum (L + s^2 n l^2 / 2)
    / (n l) = W solved for n and l). Either is predictable, so validity does not depend on it; the
    target only spends the evidence where the stopping rule will look (about 2x fewer items).

    Returns (low, high) of shape runs x t (running intersections) and the state after the block. The
    numpy work is per time step column only through cumulative sums, so a block costs O(runs * t).
    """
    import numpy as np

    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    runs, t = x.shape
    n0 = np.broadcast_to(np.asarray(state.n, dtype=float), (runs,))
    if t == 0:
        raise ValueError("advance needs at least one outcome")
    if np.any(n0 + t > size):
        raise ValueError(f"stratum of {size} items cannot take more than {size} outcomes")
    i = n0[:, None] + np.arange(1, t + 1)[None, :]  # 1-based index of each draw
    s_cum = np.asarray(state.s, dtype=float).reshape(-1, 1) + np.cumsum(x, axis=1)
    s_prev = s_cum - x
    mu = (0.5 + s_cum) / (i + 1.0)  # muhat_i
    mu_prev = np.concatenate([np.broadcast_to(np.asarray(state.mu_hat, float).reshape(-1, 1), (runs, 1)),
                              mu[:, :-1]], axis=1)
    sq_cum = np.asarray(state.sq, dtype=float).reshape(-1, 1) + np.cumsum((x - mu) ** 2, axis=1)
    sq_prev = np.concatenate([np.broadcast_to(np.asarray(state.sq, float).reshape(-1, 1), (runs, 1)),
                              sq_cum[:, :-1]], axis=1)
    var_prev = sq_prev / i  # sigmahat^2_{i-1} = (1/4 + sum_{j<i} ...) / i
    log_term = _log_term(alpha)
    if target is None:
        lam = np.minimum(np.sqrt(2.0 * log_term / (var_prev * i * np.log1p(i))), MAX_BET)
    else:
        lam = np.minimum(target / var_prev, MAX_BET)
    rem = size - i + 1.0
    a = np.asarray(state.a, float).reshape(-1, 1) + np.cumsum(lam * (x + s_prev / rem), axis=1)
    b = np.asarray(state.b, float).reshape(-1, 1) + np.cumsum(lam * size / rem, axis=1)
    psi = -np.log1p(-lam) - lam
    v = np.asarray(state.v, float).reshape(-1, 1) + np.cumsum(psi * (x - mu_prev) ** 2, axis=1)
    half = (log_term + v) / b
    center = a / b
    low = np.maximum(center - half, s_cum / size)
    high = np.minimum(center + half, (s_cum + size - i) / size)
    low = np.maximum.accumulate(np.maximum(low, np.asarray(state.low, float).reshape(-1, 1)), axis=1)
    high = np.minimum.accumulate(np.minimum(high, np.asarray(state.high, float).reshape(-1, 1)), axis=1)
    low = np.clip(low, 0.0, 1.0)
    high = np.clip(high, 0.0, 1.0)
    new = StratumState(n=i[:, -1], s=s_cum[:, -1], mu_hat=mu[:, -1], sq=sq_cum[:, -1], a=a[:, -1],
                       b=b[:, -1], v=v[:, -1], low=low[:, -1], high=high[:, -1])
    return low, high, new


def advance_one(state: StratumState, x: float, size: int, alpha: float,
                target: float | None = None) -> StratumState:
    """`advance` for one outcome of one run, in plain floats: the same sums in the same order, without
    numpy's per-call cost (a live run feeds its items one at a time, 20,000 of them in a few ms)."""
    if state.n + 1 > size:
        raise ValueError(f"stratum of {size} items cannot take more than {size} outcomes")
    i = float(state.n) + 1.0
    s_prev = float(state.s)
    s_cum = s_prev + x
    mu = (0.5 + s_cum) / (i + 1.0)
    var_prev = float(state.sq) / i
    log_term = _log_term(alpha)
    if target is None:
        lam = min(math.sqrt(2.0 * log_term / (var_prev * i * math.log1p(i))), MAX_BET)
    else:
        lam = min(target / var_prev, MAX_BET)
    rem = size - i + 1.0
    a = float(state.a) + lam * (x + s_prev / rem)
    b = float(state.b) + lam * size / rem
    v = float(state.v) + (-math.log1p(-lam) - lam) * (x - float(state.mu_hat)) ** 2
    half = (log_term + v) / b
    center = a / b
    low = max(center - half, s_cum / size, float(state.low))
    high = min(center + half, (s_cum + size - i) / size, float(state.high))
    return StratumState(n=i, s=s_cum, mu_hat=mu, sq=float(state.sq) + (x - mu) ** 2, a=a, b=b, v=v,
                        low=min(max(low, 0.0), 1.0), high=min(max(high, 0.0), 1.0))


def _scalars(state: StratumState) -> StratumState:
    """The one run of `advance`'s state (arrays of length 1) as plain floats."""
    return StratumState(**{k: float(getattr(state, k)[0]) for k in state.__dataclass_fields__})


def _check(size: int, alpha: float) -> None:
    if size < 1:
        raise ValueError(f"a stratum needs at least one item, got size {size}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


@dataclass(frozen=True)
class ConfSeq:
    """The running CS of a stratified run; `update` returns a new value (the old one is unchanged).

    `target` (a half-width, e.g. 0.02 for +-2 points) tunes the bets of the items still to come;
    a continued run with a smaller W is `dataclasses.replace(cs, target=...)` (the sums so far stay).
    `weights` (stratum -> weight, summing to 1) bound another mean than the items' (N_h / N): a
    headline that is the unweighted mean over its cells (TDBench's RE, IFBench's Avg) takes 1/H each.
    """

    sizes: Mapping[str, int]
    alpha: float = 0.05
    target: float | None = None
    states: Mapping[str, StratumState] | None = None
    weights: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if not self.sizes:
            raise ValueError("a confidence sequence needs at least one stratum")
        for size in self.sizes.values():
            _check(int(size), self.alpha)
        if self.target is not None and not 0.0 < self.target <= 1.0:
            raise ValueError(f"target half-width must be in (0, 1], got {self.target}")
        if self.weights is not None and (set(self.weights) != set(self.sizes)
                                         or any(w < 0 for w in self.weights.values())
                                         or not math.isclose(sum(self.weights.values()), 1.0, rel_tol=1e-9)):
            raise ValueError("weights must give every stratum a weight >= 0, summing to 1")

    @property
    def _alpha_h(self) -> float:
        return self.alpha / len(self.sizes)

    def update(self, stratum: str, x: float) -> ConfSeq:
        if stratum not in self.sizes:
            raise ValueError(f"unknown stratum {stratum!r}")
        if not 0.0 <= float(x) <= 1.0:
            raise ValueError(f"outcome must be in [0, 1], got {x!r} in stratum {stratum!r}")
        states = dict(self.states or {})
        old = states.get(stratum, StratumState())
        states[stratum] = advance_one(old, float(x), int(self.sizes[stratum]), self._alpha_h, self.target)
        return replace(self, states=states)

    def stratum_interval(self, stratum: str) -> tuple[float, float]:
        st = (self.states or {}).get(stratum)
        return (0.0, 1.0) if st is None else (float(st.low), float(st.high))

    def n(self) -> int:
        return int(sum(int(st.n) for st in (self.states or {}).values()))

    def interval(self) -> tuple[float, float]:
        """The overall mean's bounds: the strata's bounds weighted by N_h / N (or by `weights`)."""
        total = float(sum(self.sizes.values()))
        low = high = 0.0
        for name, size in self.sizes.items():
            lo, hi = self.stratum_interval(name)
            w = size / total if self.weights is None else float(self.weights[name])
            low += w * lo
            high += w * hi
        return max(0.0, low), min(1.0, high)


def interval(observations_by_stratum: Mapping[str, Sequence[float]], sizes_by_stratum: Mapping[str, int],
             alpha: float = 0.05, target: float | None = None) -> tuple[float, float]:
    """The CS's (low, high) after these outcomes, each stratum's listed in the order they were asked.

    `target` must be the one the run used while asking (it set the bets); None = untuned bets.
    """
    unknown = set(observations_by_stratum) - set(sizes_by_stratum)
    if unknown:
        raise ValueError(f"observations for strata without a size: {sorted(unknown)}")
    cs = ConfSeq(sizes=dict(sizes_by_stratum), alpha=alpha, target=target)
    states: dict[str, StratumState] = {}
    for name, xs in observations_by_stratum.items():
        if len(xs) == 0:
            continue
        if any(not 0.0 <= float(x) <= 1.0 for x in xs):
            raise ValueError(f"outcomes must be in [0, 1] (stratum {name!r})")
        _, _, st = advance(StratumState(), [list(map(float, xs))], int(sizes_by_stratum[name]), cs._alpha_h,
                          target)
        states[name] = _scalars(st)
    return replace(cs, states=states).interval()
