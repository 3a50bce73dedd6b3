"""Acceptance simulations for the anytime paired test (issue 46, item 2's statistics) and its API.

Vectorised over runs: each rule is computed for 2,000 seeded runs at once. The live `PairState` is
checked against the vectorised wealth so the simulated rule is the one a run would use.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.metrics.analysis.sequential_pairs import (
    PairState,
    anytime_p_values,
    holm,
    log_wealth_items,
)

RUNS = 2000
CAP = 1000
ALPHA = 0.05


def _pairs(rng: np.random.Generator, delta: float, psi: float, runs: int = RUNS, n: int = CAP):
    """Paired correctness with P(A alone right) = (ψ+δ)/2, P(B alone right) = (ψ-δ)/2, both right else ~½."""
    u = rng.random((runs, n))
    a_only = u < (psi + delta) / 2
    b_only = (u >= (psi + delta) / 2) & (u < psi)
    both = (u >= psi) & (rng.random((runs, n)) < 0.5)
    return a_only | both, b_only | both


def _stop_items(log_wealth: np.ndarray) -> np.ndarray:
    """Items at which the test first rejects (inf when it never does by the cap)."""
    hit = log_wealth >= math.log(1 / ALPHA)
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1, np.inf)


def test_power_and_median_items_at_ten_points_and_thirty_percent_discordance():
    a, b = _pairs(np.random.default_rng(46), 0.10, 0.30)
    stops = _stop_items(log_wealth_items(a, b))
    power = float(np.mean(stops <= CAP))
    median = float(np.median(stops))
    assert power >= 0.80, power
    assert median < 233, median  # fixed-design McNemar needs 233 (planning.mcnemar_items_raw)


def test_no_difference_is_called_different_at_most_five_and_a_half_percent():
    a, b = _pairs(np.random.default_rng(4646), 0.0, 0.30)
    rate = float(np.mean(np.isfinite(_stop_items(log_wealth_items(a, b)))))
    assert rate <= 0.055, rate


def test_holm_keeps_the_familywise_rate_over_four_equal_models():
    rng = np.random.default_rng(460)
    ease = rng.random((RUNS, CAP))  # item difficulty shared by the models: pairs are correlated
    models = [rng.random((RUNS, CAP)) < 0.35 + 0.5 * ease for _ in range(4)]
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    final_p = np.stack([anytime_p_values(log_wealth_items(models[i], models[j]))[:, -1] for i, j in pairs], axis=1)
    # anytime p-values only fall, so Holm at the cap rejects whatever Holm rejected at any earlier look
    any_rejected = [any(holm(list(row), ALPHA)) for row in final_p]
    raw_any = float(np.mean((final_p <= ALPHA).any(axis=1)))
    fwer = float(np.mean(any_rejected))
    assert fwer <= 0.055, fwer
    assert fwer <= raw_any  # Holm is no more permissive than testing each pair at α


def test_pair_state_follows_the_vectorised_wealth_and_decides():
    a, b = _pairs(np.random.default_rng(7), 0.20, 0.40, runs=1, n=400)
    path = log_wealth_items(a[0], b[0])
    state = PairState()
    decided_at = None
    for i, (x, y) in enumerate(zip(a[0], b[0], strict=True)):
        state.update(bool(x), bool(y))
        assert state.log_wealth == pytest.approx(path[i], abs=1e-9)
        if decided_at is None and state.decided(ALPHA):
            decided_at = i + 1
    assert state.n == 400 and state.only_a + state.only_b == int(np.sum(a[0] != b[0]))
    assert state.p_value() == pytest.approx(float(anytime_p_values(path)[-1]))
    assert decided_at is not None and decided_at == _stop_items(path[None, :])[0]
    lo, hi = state.interval(ALPHA)
    assert lo > 0 and lo <= state.difference() <= hi  # A is better, and the interval says so


def test_interval_covers_the_truth_at_every_item():
    rng = np.random.default_rng(11)
    misses = 0
    widths = []
    for _ in range(40):
        a, b = _pairs(rng, 0.0, 0.30, runs=1, n=300)
        state = PairState()
        for x, y in zip(a[0], b[0], strict=True):
            state.update(bool(x), bool(y))
            lo, hi = state.interval(ALPHA)
            if not lo <= 0.0 <= hi:
                misses += 1
                break
        widths.append((hi - lo) / 2)
    assert misses <= 4  # at most 10 % of 40 runs; the guarantee is 5 % over all time
    half = float(np.median(widths))
    assert 0.03 < half < 0.15, half  # ±3..15 points after 300 items at ψ = 0.3


def test_a_pair_with_no_difference_is_decided_by_width_alone():
    a, b = _pairs(np.random.default_rng(12), 0.0, 0.30, runs=1, n=800)
    state = PairState()
    for x, y in zip(a[0], b[0], strict=True):
        state.update(bool(x), bool(y))
    lo, hi = state.interval(ALPHA)
    half = (hi - lo) / 2
    assert state.p_value() > ALPHA and not state.decided(ALPHA)  # the test does not reject...
    assert 0.02 < half < 0.10, half
    assert state.decided(ALPHA, width=0.10)  # ...but ±10 points is settled
    assert not state.decided(ALPHA, width=half - 0.005)


def test_holm_steps_down():
    assert holm([0.01, 0.04, 0.03], 0.05) == [True, False, False]
    assert holm([0.01, 0.02, 0.024], 0.05) == [True, True, True]
    assert holm([0.2, 0.001], 0.05) == [False, True]
    assert holm([], 0.05) == []


def test_design_must_be_possible():
    with pytest.raises(ValueError, match="discordance"):
        PairState(effect=0.4, discordance=0.3)
