"""Token buckets on virtual time: smooth refill, debt and refunds, bucket sizes."""

from __future__ import annotations

import pytest
from fake_clock import FakeClock

from evalkit.ask.rate_limiter import Limiter, TokenBucket

EPS = 1e-6

# --- TokenBucket -------------------------------------------------------------------------


def test_bucket_starts_full_and_refills_smoothly() -> None:
    clock = FakeClock()
    b = TokenBucket(100.0, 10.0, clock)
    assert all(b.try_take(1) == 0.0 for _ in range(10))
    wait = b.try_take(1)
    assert wait == pytest.approx(0.01)
    assert b.level == pytest.approx(0.0)  # a refused take takes nothing
    clock.t += wait
    assert b.try_take(1) == 0.0
    clock.t += 100.0
    assert b.level == pytest.approx(10.0)  # never more than the burst capacity


def test_bucket_adjust_debt_and_refund() -> None:
    clock = FakeClock()
    b = TokenBucket(10.0, 5.0, clock)
    b.adjust(15)
    assert b.level == pytest.approx(-10.0)
    assert b.try_take(1) == pytest.approx(1.1)
    b.adjust(-8)
    assert b.level == pytest.approx(-2.0)
    b.adjust(-100)
    assert b.level == pytest.approx(5.0)  # refunds are capped at capacity


def test_bucket_oversized_request_waits_for_full_then_goes_into_debt() -> None:
    clock = FakeClock()
    b = TokenBucket(10.0, 5.0, clock)
    assert b.try_take(3) == 0.0
    assert b.try_take(50) == pytest.approx(0.3)  # waits for a full bucket, not for 50 tokens
    clock.t += 0.3
    assert b.try_take(50) == 0.0
    assert b.level == pytest.approx(-45.0)


def test_bucket_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1, FakeClock())
    with pytest.raises(ValueError):
        TokenBucket(1, 0, FakeClock())


def test_limiter_bucket_sizes() -> None:
    lim = Limiter(rpm=6000, tpm=600_000, clock=FakeClock())
    assert lim.rpm_bucket is not None and lim.tpm_bucket is not None
    assert lim.rpm_bucket.rate == pytest.approx(100.0)
    assert lim.rpm_bucket.capacity == pytest.approx(10.0)
    assert lim.tpm_bucket.capacity == pytest.approx(1000.0)
    small = Limiter(rpm=60, tpm=100, clock=FakeClock())
    assert small.rpm_bucket is not None and small.rpm_bucket.capacity == 1.0
    assert small.tpm_bucket is not None and small.tpm_bucket.capacity == 1.0
    assert Limiter(clock=FakeClock()).rpm_bucket is None
    with pytest.raises(ValueError):
        Limiter(concurrency=0)
    with pytest.raises(ValueError):
        Limiter(rpm=0)
