"""An anytime-valid paired test of two models on the same items, and Holm over several pairs.

Why sequential: a comparison may stop as soon as it is settled and may be continued later, so the
test must stay valid at any data-dependent stopping time, which a fixed-n McNemar (significance.py's
`mcnemar_exact`, kept for finished runs) is not. Sources read 2026-11-29: Ville's inequality and
testing by betting (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
betting", JRSS-B 2024, abstract at http://www.cs.cmu.edu/~theorylunch/abstractsHTML/20211201.html);
Connor 1987 for the planned effect (planning.py).

The test (McNemar-type). Only items where exactly one model is right carry information; under H0
(p_A = p_B) each such item favours A with probability 1/2, whatever the concordant items do. The
wealth is a mixture of likelihood ratios against that fair coin, so it is a nonnegative martingale
under H0 and Ville's inequality gives P(sup wealth ≥ 1/α) ≤ α: reject when it reaches 1/α, and
1 / (running max of wealth) is an anytime p-value. The mixture puts `design_weight` on the planned
discordant-sign probability 1/2 ± δ/(2ψ) (both signs, as a fixed-n power calculation plans for
one effect; this is what makes the median stop earlier than the fixed design) and the rest on the
Krichevsky-Trofimov (Jeffreys Beta(1/2, 1/2)) mixture, which eventually detects any effect.

Scores between 0 and 1 (a group's mean over repeats or variants). The wealth is written as bets:
a disagreement D = a - b ∈ {-1, 1} multiplies the design's parts by 1 ± (2q - 1)·D and the KT part by
1 + λ·D, λ = (2s - k)/(k + 1) its predictable bet (s the wins of A, k the disagreements so far), which
is the KT predictive probability exactly. The same products are defined for any D ∈ [-1, 1] (s and k
then sum D's positive parts and |D|): every factor is positive and has mean 1 when E[D | the past] = 0,
so the wealth stays a nonnegative martingale under "no difference" and the test stays valid; for
right-or-wrong scores it is the McNemar-type test above, unchanged.

The interval. δ = p_A - p_B is the mean of D = a - b ∈ {-1, 0, 1}. For each candidate δ on a grid we
run the hedged betting capital of Waudby-Smith & Ramdas with predictable plug-in bets (their
PrPl-EB-style λ, truncated); a candidate leaves the set once its capital, at any time so far, reached
1/α. The set is a confidence sequence: it covers the true δ at all times with probability ≥ 1 - α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evalkit.metrics.analysis import significance

if TYPE_CHECKING:  # numpy is imported where it is used: `import evalkit` stays light
    import numpy as np

GRID_STEP = 0.0005  # resolution of the interval for δ (a twentieth of a point)
_TUNE_ALPHA = 0.05  # the bets' size is tuned for this level; validity holds at every level
_MAX_BET = 0.5      # the bet's truncation, as a fraction of the most the capital can lose
_BLOCK = 256        # items the interval's grid takes at once (a block of 256 x 4,001 floats)


def design_probability(effect: float, discordance: float) -> float:
    """The planned P(A right | the two disagree): 1/2 + δ/(2ψ)."""
    if not 0.0 < abs(effect) < discordance <= 1.0:
        raise ValueError(f"need 0 < |effect| < discordance <= 1, got effect={effect}, discordance={discordance}")
    return 0.5 + abs(effect) / (2 * discordance)


def log_wealth_items(a_correct: np.ndarray, b_correct: np.ndarray, *, effect: float = 0.10,
                     discordance: float = 0.30, design_weight: float = 0.8) -> np.ndarray:
    """log wealth after each paired item, vectorised over the last axis (rows are runs).

    The same wealth `PairState` keeps item by item, so a simulation (or `evalkit plan`'s median)
    and the live rule agree; concordant items leave it unchanged. Scores are right-or-wrong (bools)
    or fractions in [0, 1] (a mean over repeats).
    """
    import numpy as np
    a = np.asarray(a_correct, dtype=np.float64)
    b = np.asarray(b_correct, dtype=np.float64)
    if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) > 1):
        raise ValueError("paired scores must be within 0..1")
    d = a - b
    s = np.cumsum(np.maximum(d, 0.0), axis=-1)
    k = np.cumsum(np.abs(d), axis=-1)
    # Krichevsky-Trofimov's predictable bet before the item, (2s - k) / (k + 1) with s, k before it
    bet = (2 * (s - np.maximum(d, 0.0)) - (k - np.abs(d))) / (k - np.abs(d) + 1)
    log_kt = np.cumsum(np.log1p(bet * d), axis=-1)
    lean = 2 * design_probability(effect, discordance) - 1
    log_up = np.cumsum(np.log1p(lean * d), axis=-1)
    log_down = np.cumsum(np.log1p(-lean * d), axis=-1)
    w = design_weight
    if not 0.0 < w <= 1.0:
        raise ValueError(f"design_weight must be in (0, 1], got {w}")
    parts = [math.log(w / 2) + log_up, math.log(w / 2) + log_down]
    if w < 1:
        parts.append(math.log(1 - w) + log_kt)
    return np.logaddexp.reduce(np.stack(parts), axis=0)


def anytime_p_values(log_wealth: np.ndarray) -> np.ndarray:
    """Anytime p-values along the last axis: 1 / the running max of the wealth (capped at 1)."""
    import numpy as np
    return np.minimum(1.0, np.exp(-np.maximum.accumulate(np.maximum(log_wealth, 0.0), axis=-1)))


def _grid() -> np.ndarray:
    import numpy as np
    return np.linspace(-1.0, 1.0, int(round(2 / GRID_STEP)) + 1)


@dataclass
class PairState:
    """Two models' paired outcomes so far: counts, the test's wealth and the interval's capital.

    Feed it only items both models answered (an item counts for a pair only then).
    """

    effect: float = 0.10
    discordance: float = 0.30
    design_weight: float = 0.8
    n: int = field(default=0, init=False)            # paired items seen
    only_a: float = field(default=0, init=False)     # A right, B wrong (with scores: the sum of a - b > 0)
    only_b: float = field(default=0, init=False)     # B right, A wrong (with scores: the sum of b - a > 0)
    log_wealth: float = field(default=0.0, init=False)
    max_log_wealth: float = field(default=0.0, init=False)
    _grid: np.ndarray = field(default_factory=_grid, init=False, repr=False)
    _log_up: np.ndarray = field(init=False, repr=False)
    _log_down: np.ndarray = field(init=False, repr=False)
    _max_log_cap: np.ndarray = field(init=False, repr=False)
    _sum_y: float = field(default=0.0, init=False, repr=False)
    _sum_sq: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        import numpy as np
        self._q = design_probability(self.effect, self.discordance)
        self._log_up = np.zeros_like(self._grid)
        self._log_down = np.zeros_like(self._grid)
        self._max_log_cap = np.zeros_like(self._grid)
        # the candidate means of Y and the largest bet each allows: constants of the grid, made once
        self._m = (self._grid + 1) / 2
        self._cap_up = _MAX_BET / np.maximum(self._m, 1e-12)
        self._cap_down = _MAX_BET / np.maximum(1 - self._m, 1e-12)
        self._log_parts = [math.log(self.design_weight / 2)] * 2 + (
            [math.log(1 - self.design_weight)] if self.design_weight < 1 else [])
        self._pending: list[tuple[float, float]] = []  # (y, bet) of items the grid has not taken yet

    def update(self, a_correct: float, b_correct: float) -> None:
        """One more item both answered: right or wrong (bools), or each model's score in [0, 1]."""
        a, b = float(a_correct), float(b_correct)
        if not (0.0 <= a <= 1.0 and 0.0 <= b <= 1.0):
            raise ValueError(f"paired scores must be within 0..1, got {a_correct!r}, {b_correct!r}")
        d = a - b
        self._bet_interval((d + 1) / 2)
        self.n += 1
        if d == 0:
            return
        k = self.only_a + self.only_b
        bet = (2 * self.only_a - k) / (k + 1)  # KT's predictable bet: 2 (s + 1/2) / (k + 1) - 1
        lean = 2 * self._q - 1
        steps = [math.log1p(lean * d), math.log1p(-lean * d)]
        if self.design_weight < 1:
            steps.append(math.log1p(bet * d))
        self._log_parts = [x + s for x, s in zip(self._log_parts, steps, strict=True)]
        if d in (1.0, -1.0):  # right-or-wrong: counts stay whole numbers
            self.only_a, self.only_b = (self.only_a + 1, self.only_b) if d > 0 else (self.only_a, self.only_b + 1)
        else:
            self.only_a += max(d, 0.0)
            self.only_b += max(-d, 0.0)
        top = max(self._log_parts)
        self.log_wealth = top + math.log(sum(math.exp(x - top) for x in self._log_parts))
        self.max_log_wealth = max(self.max_log_wealth, self.log_wealth)

    def _bet_interval(self, y: float) -> None:
        """The interval's bet on Y = (D + 1) / 2 ∈ [0, 1], from the items before it (a scalar); the capital
        of every candidate mean is brought up to date only when the interval is read (`_settle`), so a
        pair decided by its test alone never pays for the grid item by item."""
        t = self.n + 1
        mean_prev = (0.5 + self._sum_y) / t
        var_prev = (0.25 + self._sum_sq) / t
        lam = math.sqrt(2 * math.log(2 / _TUNE_ALPHA) / (var_prev * t * math.log(t + 1)))
        self._pending.append((y, lam))
        self._sum_y += y
        self._sum_sq += (y - mean_prev) ** 2

    def _settle(self) -> None:
        """Hedged betting capital for every candidate mean after the pending items, in blocks of rows
        (items) by grid points; the running maximum is taken over every item, as if done one at a time."""
        import numpy as np
        pending, self._pending = self._pending, []
        m = self._m
        for start in range(0, len(pending), _BLOCK):
            ys, lams = (np.array(col) for col in zip(*pending[start:start + _BLOCK], strict=True))
            gap = ys[:, None] - m[None, :]
            up = self._log_up + np.cumsum(np.log1p(np.minimum(lams[:, None], self._cap_up[None, :]) * gap), axis=0)
            down = self._log_down + np.cumsum(np.log1p(-np.minimum(lams[:, None], self._cap_down[None, :]) * gap),
                                              axis=0)
            log_cap = np.logaddexp(up, down) - math.log(2)
            np.maximum(self._max_log_cap, log_cap.max(axis=0), out=self._max_log_cap)
            self._log_up, self._log_down = up[-1], down[-1]

    def difference(self) -> float:
        """The observed p_A - p_B on the items seen."""
        return (self.only_a - self.only_b) / self.n if self.n else 0.0

    def p_value(self) -> float:
        """Anytime-valid p-value: 1 / the most the wealth has ever been (Ville)."""
        return min(1.0, math.exp(-self.max_log_wealth))

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The confidence sequence for δ = p_A - p_B at level 1 - α (the running intersection)."""
        if self._pending:
            self._settle()
        keep = self._max_log_cap < math.log(1 / alpha)
        if not keep.any():  # cannot happen with probability > α; report the point, not an empty set
            d = self.difference()
            return d, d
        values = self._grid[keep]
        return float(values[0]), float(values[-1])

    def decided(self, alpha: float = 0.05, width: float | None = None) -> bool:
        """Settled: the test rejects at α, or the interval's half-width is at most `width` (a fraction)."""
        if self.p_value() <= alpha:
            return True
        if width is None:
            return False
        lo, hi = self.interval(alpha)
        return (hi - lo) / 2 <= width


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down over pairs (significance.holm's adjusted p-values): which are rejected at
    family-wise level α, in the input order.

    With anytime p-values (1 / max wealth, non-increasing) the rejections hold at any stopping time.
    """
    return [p <= alpha for p in significance.holm(p_values)]
