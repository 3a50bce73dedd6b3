"""The paper's reliability estimator (TDBench §4.3, Appendix A): the exact moment solution.

RE = θ r^k + (1-θ) g^k, VE = θ r + (1-θ) g and MA = θ (1-r)^k + (1-θ) (1-g)^k solved for (θ, r, g)
on the ordered domain 0 <= g < VE < r <= 1, or None where there is no solution (the paper prints
"-"). metrics/reliability.py holds the model, the maximum-likelihood fit and the group counts.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # numpy is imported where used
    import numpy as np

_EPS = 1e-12


class Decomposition(NamedTuple):
    """θ (share known), r (accuracy when known), g (accuracy when guessing), A_adj = θ·r."""

    theta: float
    r: float
    g: float
    a_adj: float

    def as_dict(self) -> dict[str, float]:
        return {"theta": self.theta, "r": self.r, "g": self.g, "A_adj": self.a_adj}


def forward(theta: float, r: float, g: float, k: int = 4) -> tuple[float, float, float]:
    """(RE, VE, MA) implied by (θ, r, g): the model the decomposition inverts."""
    re = theta * r**k + (1 - theta) * g**k
    ve = theta * r + (1 - theta) * g
    ma = theta * (1 - r) ** k + (1 - theta) * (1 - g) ** k
    return re, ve, ma


def _secant(r: float, g: float, k: int) -> float:
    """(r^k - g^k) / (r - g) = sum_{i<k} r^i g^(k-1-i): defined (and smooth) even at r = g."""
    return sum(r**i * g ** (k - 1 - i) for i in range(k))


def _r_of_g(g: float, re: float, ve: float, k: int) -> float | None:
    """The unique r in (g, 1] on the first secant identity (paper eq. 5), or None."""
    from scipy.optimize import brentq

    target = (re - g**k) / (ve - g)
    lo, hi = _secant(g, g, k), _secant(1.0, g, k)
    if not lo < target <= hi + 1e-15:
        return None
    if target >= hi:
        return 1.0
    return float(brentq(lambda r: _secant(r, g, k) - target, g, 1.0, xtol=1e-15, rtol=1e-15, maxiter=200))


def _residual(g: float, re: float, ve: float, ma: float, k: int) -> float | None:
    """E(g) of paper eq. 6: zero exactly at ordered solutions; None where r(g) does not exist."""
    r = _r_of_g(g, re, ve, k)
    if r is None:
        return None
    return -_secant(1 - r, 1 - g, k) - (ma - (1 - g) ** k) / (ve - g)


def _residual_grid(grid: np.ndarray, re: float, ve: float, ma: float, k: int) -> list[float | None]:
    """E(g) on a grid at once: r(g) by vectorised bisection (only used to bracket roots)."""
    import numpy as np

    target = (re - grid**k) / (ve - grid)
    lo_r, hi_r = grid.copy(), np.ones_like(grid)
    ok = (k * grid ** (k - 1) < target) & (target <= _secant_np(hi_r, grid, k))
    for _ in range(60):
        mid = (lo_r + hi_r) / 2
        below = _secant_np(mid, grid, k) < target
        lo_r, hi_r = np.where(below, mid, lo_r), np.where(below, hi_r, mid)
    r = (lo_r + hi_r) / 2
    e = -_secant_np(1 - r, 1 - grid, k) - (ma - (1 - grid) ** k) / (ve - grid)
    return [float(v) if good else None for v, good in zip(e, ok, strict=True)]


def _secant_np(r: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    import numpy as np

    return sum((r**i * g ** (k - 1 - i) for i in range(k)), np.zeros_like(r))


def decompose(re: float, ve: float, ma: float, k: int = 4) -> Decomposition | None:
    """The paper's solution (θ, r, g, θ·r) on the ordered domain, or None where none exists.

    Degenerate inputs have no solution: VE or MA at 0 or 1, RE <= VE^k or MA <= (1-VE)^k
    (Jensen: only r = g reaches equality). Roots of E(g) are bracketed on a grid of g in
    [0, VE) and refined with Brent's method; when several exist (the measure-zero
    discriminant locus, Appendix A.5) the one with the largest θ is returned.
    """
    import numpy as np
    from scipy.optimize import brentq

    if k < 2 or not all(math.isfinite(x) for x in (re, ve, ma)):
        return None
    if not (0 < ve < 1 and 0 < ma < 1 and 0 <= re < 1):
        return None
    if re <= ve**k * (1 + 1e-12) or ma <= (1 - ve) ** k * (1 + 1e-12):
        return None
    grid = np.linspace(0.0, ve, 801)[:-1]
    values = _residual_grid(grid, re, ve, ma, k)
    roots: list[float] = []
    if values[0] is not None and abs(values[0]) < 1e-13:
        roots.append(0.0)
    for i in range(len(grid) - 1):
        a, b = values[i], values[i + 1]
        if a is None or b is None or a == 0:
            continue
        if b == 0:
            roots.append(float(grid[i + 1]))
        elif (a < 0) != (b < 0):
            lo, hi = float(grid[i]), float(grid[i + 1])
            roots.append(float(brentq(lambda g: _residual(g, re, ve, ma, k) or 0.0, lo, hi,
                                      xtol=1e-15, rtol=1e-15, maxiter=200)))
    found: list[Decomposition] = []
    for g in roots:
        r = _r_of_g(g, re, ve, k)
        if r is None or not (g < ve < r <= 1):
            continue
        theta = (ve - g) / (r - g)
        if 0 < theta < 1:
            found.append(Decomposition(float(theta), float(r), float(g), float(theta * r)))
    return max(found, key=lambda d: d.theta) if found else None
