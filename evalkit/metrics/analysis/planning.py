"""Fixed-design sample sizes: what `evalkit plan` quotes before anything is sent.

Two questions, answered with the textbook normal approximations so the figures match what a
reader can check by hand (sources read 2026-11-29):

- how many items give a 95 % interval of ±W points on an accuracy near p: the Wald size
  z² p(1-p) / W², shrunk by the finite-population correction n0 / (1 + (n0 - 1) / N) when the
  benchmark has only N items (sampling without replacement; Cochran, *Sampling Techniques*);
- how many paired items McNemar's test needs to detect a difference δ = p_A - p_B at two-sided α
  with power 1 - β when the models disagree on a share ψ of items (Connor 1987, Biometrics 43:207,
  as given at https://zarathucorp.github.io/open-powersamplesize/calculator/compare-paired-proportions/
  mcnemar-2-sided): n = (z_{1-α/2} √ψ + z_{1-β} √(ψ - δ²))² / δ².

The sequential rule (`sequential_pairs`) stops earlier than these on average; its median comes from
simulation, not from here. Sizes are rounded up (a plan should not fall short by a fraction).
"""

from __future__ import annotations

import math
from statistics import NormalDist


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)


def wald_items_raw(p: float, width: float, *, level: float = 0.95, population: int | None = None) -> float:
    """Items (unrounded) for a Wald interval of ±`width` (a fraction) at accuracy `p`; FPC when `population`."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"accuracy must be strictly between 0 and 1, got {p}")
    if width <= 0:
        raise ValueError(f"width must be positive, got {width}")
    z = _z(0.5 + level / 2)
    n0 = z * z * p * (1 - p) / (width * width)
    if population is None:
        return n0
    if population < 1:
        raise ValueError(f"population must be at least 1, got {population}")
    return n0 / (1 + (n0 - 1) / population)


def wald_items(p: float, width: float, *, level: float = 0.95, population: int | None = None) -> int:
    """Items for ±`width` at accuracy `p`, rounded up, never more than the population."""
    n = math.ceil(wald_items_raw(p, width, level=level, population=population) - 1e-9)
    return min(n, population) if population is not None else n


def mcnemar_items_raw(effect: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Paired items (unrounded) for McNemar's two-sided test (Connor 1987's normal approximation).

    `effect` is δ = p_A - p_B and `discordance` ψ the share of items where exactly one model is right,
    both as fractions; |δ| ≤ ψ because every difference comes from a discordant item.
    """
    d = abs(effect)
    if not 0.0 < d <= discordance <= 1.0:
        raise ValueError(f"need 0 < |effect| <= discordance <= 1, got effect={effect}, discordance={discordance}")
    if not (0.0 < alpha < 1.0 and 0.0 < power < 1.0):
        raise ValueError(f"alpha and power must be in (0, 1), got alpha={alpha}, power={power}")
    num = _z(1 - alpha / 2) * math.sqrt(discordance) + _z(power) * math.sqrt(discordance - d * d)
    return num * num / (d * d)


def mcnemar_items(effect: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired items for McNemar's test, rounded up."""
    return math.ceil(mcnemar_items_raw(effect, discordance, alpha=alpha, power=power) - 1e-9)
