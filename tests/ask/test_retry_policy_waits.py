"""The retry policy on virtual time: a 429 waits its Retry-After up to the cap (else the backoff),
each 429 is an attempt, and a refused request waits alone while the others go on.

The header parser is in test_retry_after_header.py; whole runs against the simulator in
test_bounded_waits.py.
"""

from __future__ import annotations

import pytest
from fake_clock import FakeClock

from evalkit.ask import retry
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy, rate_limit_wait_s, with_retries
from evalkit.core.errors import ProviderError


@pytest.fixture
def ceiling_backoff(monkeypatch):
    """backoff_s returns its ceiling instead of a uniform draw below it, so waits are exact numbers."""
    monkeypatch.setattr(retry.random, "uniform", lambda low, high: high)


def refusing(clock: FakeClock, retry_after: float | None, refusals: int, log: list[float], work_s: float = 1.0):
    """A call that takes work_s, answers 429 (with retry_after) `refusals` times, then "ok"."""
    async def call() -> str:
        log.append(clock.now())
        await clock.sleep(work_s)
        if len(log) <= refusals:
            raise ProviderError("rate_limit", "429", retry_after=retry_after, status=429)
        return "ok"
    return call


@pytest.mark.parametrize("retry_after, wait", [
    (999999.0, 1.5),  # capped
    (float("inf"), 1.5),  # what a provider's own header parsing may hand over
    (0.25, 0.25),  # honoured below the cap
    (0.0, 0.0),
    (-3.0, 0.0),
    (None, None),  # no Retry-After: the backoff
    (float("nan"), None),
])
async def test_a_429_waits_its_retry_after_up_to_the_cap(retry_after, wait, ceiling_backoff):
    clock = FakeClock()
    lim = Limiter(concurrency=4, clock=clock)
    policy = RetryPolicy(max_attempts=5, initial_s=0.1, max_retry_after_s=1.5)
    starts: list[float] = []
    [out] = await clock.run([with_retries(refusing(clock, retry_after, 3, starts), policy, lim)])
    waits = [b - a - 1.0 for a, b in zip(starts, starts[1:], strict=False)]
    expected = [wait] * 3 if wait is not None else [0.1, 0.2, 0.4]  # the backoff doubles
    assert out == "ok" and waits == pytest.approx(expected)
    assert lim.paused_until == float("-inf") and lim.stats.paused_s == 0.0  # nobody else was stopped


async def test_each_429_is_an_attempt_and_the_last_is_not_waited_for():
    clock = FakeClock()
    lim = Limiter(clock=clock)
    starts: list[float] = []
    attempts: list[int] = []
    policy = RetryPolicy(max_attempts=3, max_retry_after_s=2.0)
    with pytest.raises(ProviderError) as err:
        await clock.run([with_retries(refusing(clock, 999999.0, 99, starts), policy, lim,
                                      on_attempt=attempts.append)])
    assert err.value.kind == "rate_limit" and attempts == [1, 2, 3]
    assert starts == pytest.approx([0.0, 3.0, 6.0]) and clock.now() == pytest.approx(7.0)


def test_the_default_cap_is_a_minute():
    assert RetryPolicy().max_retry_after_s == 60.0
    assert rate_limit_wait_s(RetryPolicy(), 1e9, 1) == 60.0
    assert rate_limit_wait_s(RetryPolicy(max_retry_after_s=float("nan")), 5.0, 1) == 0.0


async def test_a_429_does_not_stop_the_other_requests():
    """20 one-second requests, 4 at a time; the first is refused at t=1 with Retry-After 5. The other
    19 go on in waves (t = 0, 1, 2, 3, 4) and are done at t=5; the refused one alone starts again at
    t=6. Pausing the whole client would have started nobody between t=1 and t=6."""
    clock = FakeClock()
    lim = Limiter(concurrency=4, clock=clock)
    policy = RetryPolicy(max_retry_after_s=60.0)
    first: list[float] = []
    others: list[list[float]] = [[] for _ in range(19)]
    done: list[float] = []

    async def one(call) -> None:
        await with_retries(call, policy, lim)
        done.append(clock.now())

    tasks = [one(refusing(clock, 5.0, 1, first))] + [one(refusing(clock, None, 0, log)) for log in others]
    await clock.run(tasks)
    starts = sorted(log[0] for log in others)
    assert starts == pytest.approx([0.0] * 3 + [1.0] * 4 + [2.0] * 4 + [3.0] * 4 + [4.0] * 4)
    assert first == pytest.approx([0.0, 6.0])
    assert sorted(done) == pytest.approx([1.0] * 3 + [2.0] * 4 + [3.0] * 4 + [4.0] * 4 + [5.0] * 4 + [7.0])
    assert lim.stats.max_in_flight == 4 and lim.stats.paused_s == 0.0 and lim.stats.requests == 21
