"""Adaptive limits, the pure policy (AdaptiveRate): announced limits followed just under, and AIMD where
nothing is announced (refusals cut to a share of the measured rate, then a climb back and slow probing),
fed replies at times the test chooses.

The headers it reads are in test_rate_headers.py, the limiter applying it in test_adaptive_limiter.py, the
command wiring it in test_adaptive_e2e.py.
"""

from __future__ import annotations

import pytest

from evalkit.ask.adaptive import CUT, MARGIN, MEASURE_S, RAISE, AdaptiveRate
from evalkit.core.types import RateInfo


def successes(policy: AdaptiveRate, start: float, per_s: float, seconds: float) -> float:
    """Feed evenly spaced successes; return the time after the last one."""
    n = int(per_s * seconds)
    t = start
    for i in range(n):
        t = start + (i + 1) / per_s
        policy.observe(t, refused=False)
    return t


# ------------------------------------------------------------------ announced limits


def test_announced_limits_are_followed_just_under():
    policy = AdaptiveRate()
    rates = policy.observe(1.0, refused=False, info=RateInfo(requests_per_min=2400, requests_left=100,
                                                              tokens_per_min=600_000, tokens_left=5000))
    assert rates.rpm == pytest.approx(2400 * MARGIN) and rates.tpm == pytest.approx(600_000 * MARGIN)
    assert rates.source == "headers" and rates.pause_s == 0.0


def test_a_window_announced_as_used_up_pauses_until_it_resets():
    policy = AdaptiveRate()
    rates = policy.observe(1.0, refused=True, info=RateInfo(requests_per_min=60, requests_left=0, requests_reset_s=0.75,
                                                             tokens_per_min=10_000, tokens_left=0, tokens_reset_s=2.5))
    assert rates.pause_s == pytest.approx(2.5)
    assert policy.observe(1.1, refused=False, info=RateInfo(requests_per_min=60, requests_left=3)).pause_s == 0.0


def test_user_ceilings_stay_ceilings_under_announced_limits():
    policy = AdaptiveRate(ceiling_rpm=600, ceiling_tpm=None)
    rates = policy.observe(1.0, refused=False, info=RateInfo(requests_per_min=6000, tokens_per_min=90_000))
    assert rates.rpm == 600 and rates.tpm == pytest.approx(90_000 * MARGIN)
    assert policy.observe(2.0, refused=False, info=RateInfo(requests_per_min=300)).rpm == pytest.approx(300 * MARGIN)


def test_once_headers_are_seen_refusals_without_them_do_not_start_aimd():
    policy = AdaptiveRate()
    policy.observe(1.0, refused=False, info=RateInfo(requests_per_min=1200))
    for i in range(20):
        rates = policy.observe(1.0 + i * 0.01, refused=True)
    assert rates.rpm == pytest.approx(1200 * MARGIN) and rates.source == "headers"


# ------------------------------------------------------------------ AIMD, where nothing is announced


def test_nothing_is_limited_until_refusals_come():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=100, seconds=3)
    assert policy.rates().rpm is None and policy.observe(t, refused=False).source == "none"


def test_a_sustained_share_of_refusals_cuts_to_a_share_of_the_measured_rate():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=50, seconds=2)  # 50 answers/s measured over the last second
    rates = None
    for i in range(6):  # 6 refusals among the last second's 56 replies: a few per cent, no cut
        rates = policy.observe(t + 0.001 * (i + 1), refused=True)
    assert rates.rpm is None
    for i in range(14):  # 20 among 70: more than a quarter, the rate is cut
        rates = policy.observe(t + 0.01 + 0.001 * i, refused=True)
    assert rates.source == "aimd"
    assert rates.rpm == pytest.approx(50 * 60 * CUT, rel=0.05)


def test_random_refusals_at_a_steady_few_per_cent_never_cut():
    policy = AdaptiveRate(start=0.0)
    t = 0.0
    for i in range(5000):  # 100 replies/s for 50 s, every 10th refused (10 %)
        t = (i + 1) / 100
        rates = policy.observe(t, refused=i % 10 == 9)
    assert rates.rpm is None and rates.source == "none"


def test_after_a_cut_refusals_caused_by_the_old_rate_do_not_cut_again():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=100, seconds=1)
    for i in range(50):
        rates = policy.observe(t + 0.001 * i, refused=True)
    first = rates.rpm
    assert first == pytest.approx(100 * 60 * CUT, rel=0.05)
    for i in range(50):  # more refusals within half a second of the cut: sent at the old rate
        rates = policy.observe(t + 0.05 + 0.008 * i, refused=True)
    assert rates.rpm == first


def test_after_a_cut_the_rate_climbs_back_fast_then_probes_slowly_and_is_cut_again():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=100, seconds=1)
    for i in range(50):
        policy.observe(t + 0.001 * i, refused=True)
    found = policy.rates().rpm / CUT  # the success rate measured at the cut
    assert found == pytest.approx(100 * 60, rel=0.05)
    steps = []
    for k in range(1, 9):  # one success every half second: one raise each
        steps.append(policy.observe(t + 0.05 + 0.51 * k, refused=False).rpm)
    cut = found * CUT
    assert steps[0] == pytest.approx(cut * 1.05, rel=0.05)
    assert steps[1] == pytest.approx(cut * 1.05 * 1.10, rel=0.05)
    assert steps[2] == pytest.approx(min(found, cut * 1.05 * 1.10 * 1.20), rel=0.05)
    assert max(steps) <= found * RAISE ** 5 * 1.05 and steps[-1] > found  # above the rate found: 5 % a step
    assert steps[-1] / steps[-2] == pytest.approx(RAISE)
    t = t + 0.05 + 0.51 * 8
    for i in range(4):  # refusals again
        policy.observe(t + 0.001 * i, refused=True)
    probing_cut = policy.observe(t + 0.01, refused=True)  # 5 of the window's few replies: a cut while probing
    assert probing_cut.rpm < steps[-1]


def test_a_storm_of_refusals_before_anything_is_measured_holds_everyone_briefly():
    policy = AdaptiveRate()
    policy.observe(10.0, refused=False)
    holds = [policy.observe(10.01 + 0.001 * i, refused=True).pause_s for i in range(30)]
    assert holds.count(MEASURE_S) == 1 and policy.rates().rpm is None  # one hold, no rate guessed
    later = policy.observe(10.0 + MEASURE_S + 0.05, refused=True)  # a measurement exists now: cut, no hold
    assert later.pause_s == 0 and later.source == "aimd"


def test_refusals_with_nothing_answered_leave_the_rate_alone():
    policy = AdaptiveRate(start=0.0)
    for i in range(30):
        rates = policy.observe(0.01 * i, refused=True)
    assert rates.rpm is None


def test_the_cut_respects_the_ceiling():
    policy = AdaptiveRate(ceiling_rpm=120.0, start=0.0)
    assert policy.rates().rpm == 120.0  # the user's --rpm holds before anything is learned
    policy.observe(0.5, refused=False)
    for i in range(10):
        rates = policy.observe(5.0 + 0.01 * i, refused=True)  # the one success has left the window
    assert rates.rpm == 120.0
