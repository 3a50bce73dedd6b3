"""Unit tests of the stratified without-replacement confidence sequence (issue 46, item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.metrics.analysis.confseq import ConfSeq, StratumState, advance, interval


def _population(n: int, p: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def test_width_shrinks_to_zero_at_the_whole_population():
    pop = _population(500, 0.7, 1)
    order = np.random.default_rng(2).permutation(pop)
    low, high, _ = advance(StratumState(), order, 500, 0.05)
    widths = (high - low)[0]
    assert widths[-1] == 0.0
    assert low[0, -1] == pytest.approx(pop.mean()) and high[0, -1] == pytest.approx(pop.mean())
    assert widths[99] > widths[299] > widths[449] > 0.0
    # the truth is inside at every prefix on this seed
    assert ((low[0] <= pop.mean()) & (pop.mean() <= high[0])).all()


def test_running_intervals_are_nested():
    pop = _population(300, 0.4, 3)
    cs = ConfSeq(sizes={"a": 300})
    prev = (0.0, 1.0)
    for x in np.random.default_rng(4).permutation(pop)[:120]:
        cs = cs.update("a", float(x))
        now = cs.interval()
        assert prev[0] <= now[0] <= now[1] <= prev[1]
        prev = now


def test_update_is_pure_and_matches_the_function():
    pop = _population(200, 0.6, 5)
    xs = list(np.random.default_rng(6).permutation(pop)[:40])
    ys = [1.0, 0.0, 1.0]
    cs0 = ConfSeq(sizes={"a": 200, "b": 3})
    cs = cs0
    for x in xs:
        cs = cs.update("a", x)
    for y in ys:
        cs = cs.update("b", y)
    assert cs0.interval() == (0.0, 1.0) and cs0.n() == 0
    assert cs.n() == 43
    low, high = interval({"a": xs, "b": ys}, {"a": 200, "b": 3})
    assert (low, high) == pytest.approx(cs.interval())
    # stratum b is fully seen: exact
    assert cs.stratum_interval("b") == pytest.approx((2 / 3, 2 / 3))


def test_all_zero_and_all_one():
    lo0, hi0 = interval({"a": [0.0] * 100}, {"a": 1000})
    lo1, hi1 = interval({"a": [1.0] * 100}, {"a": 1000})
    assert lo0 == 0.0 and 0.0 < hi0 < 0.2
    assert hi1 == 1.0 and 0.8 < lo1 < 1.0
    assert (lo1, hi1) == pytest.approx((1 - hi0, 1 - lo0))
    assert interval({"a": [1.0] * 1000}, {"a": 1000}) == (1.0, 1.0)


def test_single_item_stratum_and_weights():
    # stratum b has one item, seen: known exactly; a unseen: [0, 1]; weights 3/4 and 1/4
    low, high = interval({"b": [1.0]}, {"a": 3, "b": 1})
    assert (low, high) == pytest.approx((0.25, 1.0))
    assert interval({}, {"a": 3, "b": 1}) == (0.0, 1.0)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="size"):
        interval({"x": [1.0]}, {"a": 3})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ConfSeq(sizes={"a": 3}).update("a", 2.0)
    with pytest.raises(ValueError, match="more than 2"):
        interval({"a": [1.0, 1.0, 0.0]}, {"a": 2})
    with pytest.raises(ValueError, match="alpha"):
        ConfSeq(sizes={"a": 3}, alpha=1.5)
