"""The anytime paired test on scores between 0 and 1 (a group's mean over repeats or variants; issue 46,
item 2): still valid under "no difference", still powerful, and the live `PairState` follows the
vectorised wealth item by item. Right-or-wrong scores give the McNemar-type test unchanged
(tests/metrics/test_sequential_pairs.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.metrics.analysis.sequential_pairs import PairState, log_wealth_items

RUNS = 2000
CAP = 1000
ALPHA = 0.05


def _repeat_means(rng: np.random.Generator, ease: np.ndarray, shift: float, k: int = 3) -> np.ndarray:
    """Each item's mean over k repeats: right with probability ease + shift on each."""
    return rng.binomial(k, np.clip(ease + shift, 0, 1)) / k


def _rejected(log_wealth: np.ndarray) -> np.ndarray:
    return (log_wealth >= math.log(1 / ALPHA)).any(axis=-1)


def test_equal_models_scored_over_three_repeats_are_called_different_at_most_five_and_a_half_percent():
    rng = np.random.default_rng(4601)
    ease = rng.random((RUNS, CAP))  # item difficulty both models share: their scores are correlated
    a, b = _repeat_means(rng, ease, 0.0), _repeat_means(rng, ease, 0.0)
    assert not np.isin(a, (0.0, 1.0)).all()  # the scores are fractions, not right-or-wrong
    rate = float(np.mean(_rejected(log_wealth_items(a, b))))
    assert rate <= 0.055, rate


def test_a_ten_point_difference_over_repeats_is_found():
    rng = np.random.default_rng(4602)
    ease = rng.uniform(0.1, 0.8, (RUNS, CAP))
    a, b = _repeat_means(rng, ease, 0.10), _repeat_means(rng, ease, 0.0)
    assert float(np.mean(_rejected(log_wealth_items(a, b)))) >= 0.80


def test_pair_state_follows_the_vectorised_wealth_on_fractions_and_on_right_or_wrong():
    rng = np.random.default_rng(4603)
    ease = rng.random(300)
    a, b = _repeat_means(rng, ease, 0.15), _repeat_means(rng, ease, 0.0)
    path = log_wealth_items(a, b)
    state = PairState()
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        state.update(float(x), float(y))
        assert state.log_wealth == pytest.approx(path[i], abs=1e-9)
    assert state.difference() == pytest.approx(float(np.mean(a - b)))
    lo, hi = state.interval(ALPHA)
    assert lo <= state.difference() <= hi
    binary = PairState()
    for x, y in ((True, False), (True, True), (False, True), (True, False)):
        binary.update(x, y)
    assert (binary.only_a, binary.only_b, binary.n) == (2, 1, 4)
    assert isinstance(binary.only_a, int)


def test_a_score_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="within 0..1"):
        PairState().update(1.5, 0.0)
    with pytest.raises(ValueError, match="within 0..1"):
        log_wealth_items(np.array([0.2, -0.1]), np.array([0.0, 0.0]))
