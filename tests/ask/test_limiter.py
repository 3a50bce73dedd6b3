"""Limiter tests on virtual time: thousands of requests, exact window bounds, no real sleeping."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Sequence

import pytest
from fake_clock import FakeClock

from evalkit.ask.rate_limiter import Limiter, RealClock

EPS = 1e-6


def max_window_excess(times: Sequence[float], weights: Sequence[float], rate: float) -> float:
    """max over all windows [t_i, t_j] of (weight started in it) - rate * (t_j - t_i).

    O(n): sum(i..j) - rate*(t_j - t_i) = (P[j+1] - rate*t_j) - (P[i] - rate*t_i), so keep
    the running minimum of the second term. times must be non-decreasing (log order).
    """
    assert all(a <= b for a, b in itertools.pairwise(times))
    best = float("-inf")
    prefix = 0.0
    low = float("inf")
    for t, w in zip(times, weights, strict=True):
        low = min(low, prefix - rate * t)
        prefix += w
        best = max(best, (prefix - rate * t) - low)
    return best


async def _request(
    lim: Limiter, clock: FakeClock, log: list[tuple[float, int]], dur: float, est: int = 0
) -> None:
    async with lim.slot(est):
        log.append((clock.now(), est))
        await clock.sleep(dur)


# --- RPM -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rpm", "n", "concurrency", "dur"),
    [
        (60, 120, 32, 0.5),
        (600, 400, 32, 0.2),
        (6000, 1000, 32, 0.05),
        (6000, 1000, 1000, 0.0),
        (60_000, 1000, 1000, 0.02),
        (1234, 300, 8, 0.1),
        (6000, 600, 50, 1.0),  # concurrency-bound: slots free up in bunches
        (6000, 600, 20, 0.3),
    ],
)
async def test_rpm_window_bound_and_long_run_rate(rpm: float, n: int, concurrency: int, dur: float) -> None:
    rng = random.Random(rpm + n + concurrency)
    clock = FakeClock()
    lim = Limiter(concurrency=concurrency, rpm=rpm, clock=clock)
    log: list[tuple[float, int]] = []
    durations = [dur * rng.choice((0.2, 1.0, 1.0, 1.8)) for _ in range(n)]
    await clock.run([_request(lim, clock, log, d) for d in durations])
    times = [t for t, _ in log]
    rate = rpm / 60.0
    cap = max(1.0, rate * 0.1)
    assert len(times) == n
    # (a) no window holds more than a burst plus the rate
    assert max_window_excess(times, [1.0] * n, rate) <= cap + EPS
    # (b) not over-throttled: after the initial burst, starts arrive at >= 95% of the rate
    # (unless the concurrency cap, not the rate, is what binds)
    span = times[-1] - times[0]
    if max(durations) == 0 or concurrency / max(durations) > 1.2 * rate:
        assert (n - cap) / span >= 0.95 * rate
    # no busy loop: about one sleep per request (the queue head sleeps the computed wait)
    assert clock.sleeps <= 2 * n + 10
    assert lim.stats.requests == n
    assert lim.stats.waited_s > 0


async def test_no_burst_when_many_slots_free_at_once() -> None:
    """Tokens are taken after the concurrency slot, so queued requests cannot bank them."""
    clock = FakeClock()
    lim = Limiter(concurrency=20, rpm=6000, clock=clock)
    log: list[tuple[float, int]] = []
    # the first 20 start over 0.1 s (a burst of 10, then 100/s) and all end at t=5
    durations = [5.0] * 10 + [5.0 - 0.01 * k for k in range(1, 11)] + [0.01] * 200
    await clock.run([_request(lim, clock, log, d) for d in durations])
    times = [t for t, _ in log]
    assert max_window_excess(times, [1.0] * len(times), 100.0) <= 10.0 + EPS
    assert sum(1 for t in times if t == pytest.approx(5.0)) <= 10


async def test_waiters_are_served_fifo() -> None:
    clock = FakeClock()
    lim = Limiter(concurrency=8, rpm=600, clock=clock)
    order: list[int] = []

    async def req(i: int) -> None:
        async with lim.slot():
            order.append(i)
            await clock.sleep(0.3)

    await clock.run([req(i) for i in range(60)])
    assert order == list(range(60))


# --- TPM -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("tpm", "rpm"), [(60_000, None), (60_000, 3000), (6_000, None)])
async def test_tpm_window_bound(tpm: float, rpm: float | None) -> None:
    rng = random.Random(7)
    clock = FakeClock()
    lim = Limiter(concurrency=64, rpm=rpm, tpm=tpm, clock=clock)
    rate = tpm / 60.0
    cap = max(1.0, rate * 0.1)
    ests = [rng.randint(1, int(cap * 2.5)) for _ in range(600)]  # some bigger than the bucket
    log: list[tuple[float, int]] = []
    await clock.run([_request(lim, clock, log, rng.uniform(0.0, 0.2), e) for e in ests])
    times = [t for t, _ in log]
    tokens = [float(e) for _, e in log]
    # (c) tokens started in any window <= capacity + rate*w + the largest single request
    assert max_window_excess(times, tokens, rate) <= cap + max(ests) + EPS
    if rpm is not None:
        assert max_window_excess(times, [1.0] * len(times), rpm / 60.0) <= max(1.0, rpm / 600.0) + EPS
    else:
        span = times[-1] - times[0]
        assert (sum(tokens) - cap) / span >= 0.95 * rate


async def test_oversized_request_waits_for_full_bucket_then_debt_delays_next() -> None:
    clock = FakeClock()
    lim = Limiter(tpm=60_000, clock=clock)  # 1000 tokens/s, capacity 100
    log: list[tuple[float, int]] = []
    await clock.run([_request(lim, clock, log, 0.0, e) for e in (50, 250, 10)])
    assert [t for t, _ in log] == pytest.approx([0.0, 0.05, 0.21])


async def test_report_tokens_refunds_and_charges() -> None:
    clock = FakeClock()
    lim = Limiter(tpm=60_000, clock=clock)  # 1000 tokens/s, capacity 100
    bucket = lim.tpm_bucket
    assert bucket is not None
    starts: list[float] = []

    async def flow() -> None:
        async with lim.slot(100) as s:
            starts.append(clock.now())
            assert bucket.level == pytest.approx(0.0)
            s.report_tokens(10)  # refund 90
            assert bucket.level == pytest.approx(90.0)
        async with lim.slot(90) as s:
            starts.append(clock.now())  # fits thanks to the refund
            s.report_tokens(290)  # 200 more than estimated
            s.report_tokens(290)  # repeating the same report changes nothing
            assert s.charged_tokens == 290
            assert bucket.level == pytest.approx(-200.0)
        async with lim.slot(100):
            starts.append(clock.now())  # pays the debt first: (200 + 100) / 1000 s

    await clock.run([flow()])
    assert starts == pytest.approx([0.0, 0.0, 0.3])


async def test_report_tokens_without_tpm_is_harmless() -> None:
    lim = Limiter(clock=FakeClock())
    async with lim.slot(50) as s:
        s.report_tokens(500)
    assert lim.stats.requests == 1


# --- pauses --------------------------------------------------------------------------------
# Limiter.pause is kept for adaptive limits; the retry policy no longer calls it on a 429
# (test_bounded_waits.py shows a 429 delaying only its own request).


async def _flow_with_pauses(
    pauses: list[tuple[float, float]], n: int = 300
) -> tuple[list[tuple[str, float]], Limiter]:
    clock = FakeClock()
    lim = Limiter(concurrency=8, rpm=1200, clock=clock)
    events: list[tuple[str, float]] = []

    async def req() -> None:
        async with lim.slot():
            events.append(("start", clock.now()))
            await clock.sleep(0.1)

    async def pauser(at: float, seconds: float) -> None:
        await clock.sleep(at)
        events.append(("pause", clock.now()))
        lim.pause(seconds)

    await clock.run([req() for _ in range(n)] + [pauser(at, s) for at, s in pauses])
    return events, lim


def _starts_after_first_pause(events: list[tuple[str, float]]) -> tuple[list[float], list[float]]:
    first = next(i for i, (kind, _) in enumerate(events) if kind == "pause")
    before = [t for kind, t in events[:first] if kind == "start"]
    after = [t for kind, t in events[first:] if kind == "start"]
    return before, after


async def test_pause_stops_everyone_including_waiters() -> None:
    events, lim = await _flow_with_pauses([(1.0, 2.0)])
    before, after = _starts_after_first_pause(events)
    assert before and after, "requests must be flowing on both sides of the pause"
    assert min(after) >= 3.0 - EPS
    assert min(after) == pytest.approx(3.0)  # and they resume as soon as it ends
    assert lim.stats.paused_s == pytest.approx(2.0)


async def test_overlapping_pauses_take_the_max() -> None:
    events, lim = await _flow_with_pauses([(1.0, 2.0), (2.0, 5.0), (3.0, 1.0)])
    _, after = _starts_after_first_pause(events)
    assert min(after) == pytest.approx(7.0)
    assert lim.stats.paused_s == pytest.approx(6.0)  # [1, 7], overlaps counted once


async def test_pause_reaches_a_request_already_sleeping_for_tokens() -> None:
    clock = FakeClock()
    lim = Limiter(rpm=60, clock=clock)  # capacity 1: the second request sleeps 1 s for its token
    starts: list[float] = []

    async def req() -> None:
        async with lim.slot():
            starts.append(clock.now())

    async def pauser() -> None:
        await clock.sleep(0.5)
        lim.pause(5.0)

    await clock.run([req(), req(), pauser()])
    assert starts == pytest.approx([0.0, 5.5])
    assert lim.paused_until == pytest.approx(5.5)


async def test_zero_pause_is_ignored() -> None:
    lim = Limiter(clock=FakeClock())
    lim.pause(0.0)
    assert lim.stats.paused_s == 0.0


# --- concurrency ---------------------------------------------------------------------------


async def test_concurrency_cap_never_exceeded() -> None:
    rng = random.Random(3)
    clock = FakeClock()
    lim = Limiter(concurrency=4, clock=clock)
    in_flight = 0
    peak = 0

    async def req() -> None:
        nonlocal in_flight, peak
        async with lim.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            assert lim.in_flight <= 4
            await clock.sleep(rng.uniform(0.01, 0.5))
            in_flight -= 1

    await clock.run([req() for _ in range(200)])
    assert peak == 4
    assert lim.stats.max_in_flight == 4
    assert lim.in_flight == 0


async def test_slot_released_when_request_fails() -> None:
    clock = FakeClock()
    lim = Limiter(concurrency=1, clock=clock)
    with pytest.raises(RuntimeError):
        async with lim.slot():
            raise RuntimeError("boom")
    assert lim.in_flight == 0
    async with lim.slot():  # would hang if the semaphore leaked
        pass
    assert lim.stats.requests == 2


async def test_cancelled_waiter_does_not_leak() -> None:
    clock = FakeClock()
    lim = Limiter(concurrency=1, rpm=60, clock=clock)
    done: list[float] = []

    async def req() -> None:
        async with lim.slot():
            done.append(clock.now())

    async def scenario() -> None:
        first = asyncio.ensure_future(req())
        waiter = asyncio.ensure_future(req())  # sleeps 1 s for its token
        await clock.sleep(0.5)
        waiter.cancel()
        await asyncio.gather(first, waiter, return_exceptions=True)
        await req()

    await clock.run([scenario()])
    assert done == pytest.approx([0.0, 1.0])
    assert lim.in_flight == 0


async def test_real_clock_smoke() -> None:
    lim = Limiter(concurrency=2, rpm=60_000, clock=RealClock())
    async with lim.slot(10) as s:
        assert s.waited_s >= 0.0
    assert lim.stats.to_dict()["requests"] == 1


def test_pause_refuses_a_wait_without_end() -> None:
    lim = Limiter(clock=FakeClock())
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="finite"):
            lim.pause(bad)
    assert lim.paused_until == float("-inf") and lim.stats.paused_s == 0.0
