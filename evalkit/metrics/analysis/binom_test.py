"""The two-sided exact binomial test, as scipy.stats.binomtest computes it, without importing scipy.stats.

Importing scipy.stats costs about a second of CPU (its docstrings are parsed at import), which was
most of `evalkit compare`. The same Boost kernels scipy.stats calls live in scipy.special's ufuncs;
this follows binomtest's two-sided branch and rv_discrete's support guards and clipping step for
step, so every p-value is bit-identical to scipy's (comparison.json's p-values must not move).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def _kernels() -> tuple[Callable[[float, float, float], float], ...]:
    """scipy's binomial pmf, cdf and sf ufuncs (imported on first use)."""
    import scipy.special._ufuncs as scu

    return scu._binom_pmf, scu._binom_cdf, scu._binom_sf


def _clip(v: float) -> float:
    return min(max(float(v), 0.0), 1.0)


def binom_two_sided(k: int, n: int, p: float) -> float:
    """binomtest(k, n, p).pvalue (alternative 'two-sided') for 0 <= k <= n, 0 < p < 1."""
    if not (0 <= k <= n) or not 0.0 < p < 1.0:
        raise ValueError(f"binomial test needs 0 <= k <= n and 0 < p < 1, got k={k}, n={n}, p={p}")
    raw_pmf, raw_cdf, raw_sf = _kernels()

    def pmf(x: float) -> float:
        if x < 0 or x > n or math.floor(x) != x:
            return 0.0
        return _clip(raw_pmf(float(x), float(n), p))

    def cdf(x: float) -> float:
        if x >= n:
            return 1.0
        return _clip(raw_cdf(float(math.floor(x)), float(n), p)) if x >= 0 else 0.0

    def sf(x: float) -> float:
        if x < 0:
            return 1.0
        return _clip(raw_sf(float(math.floor(x)), float(n), p)) if x < n else 0.0

    d = pmf(k)
    rerr = 1 + 1e-7
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = _search(lambda x: -pmf(x), -d * rerr, float(math.ceil(p * n)), float(n))
        y = n - ix + int(d * rerr == pmf(ix))
        pval = cdf(k) + sf(n - y)
    else:
        ix = _search(pmf, d * rerr, 0.0, float(math.floor(p * n)))
        y = ix + 1
        pval = cdf(y - 1) + sf(k - 1)
    return min(1.0, pval)


def _search(a: Callable[[float], float], d: float, lo: float, hi: float) -> float:
    """The index i in [lo, hi] with a(i) <= d < a(i + 1) (binomtest's own binary search)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        midval = a(mid)
        if midval < d:
            lo = mid + 1
        elif midval > d:
            hi = mid - 1
        else:
            return mid
    return lo if a(lo) <= d else lo - 1
