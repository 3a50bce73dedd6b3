"""Adaptive limits applied by the Limiter: requests spaced at the announced rate and everyone paused while a
window is used up, on a fake clock; then the Limiter and the retry policy (with_retries) against the
simulator's hidden limit, on virtual time: 250 queries in 0.1-1 s, the same on any machine.

The policy alone is in test_adaptive_policy.py; the command wiring it to the wire in test_adaptive_e2e.py.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from fake_clock import FakeClock as VirtualTime

from evalkit.ask import retry
from evalkit.ask.adaptive import MARGIN
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy, with_retries
from evalkit.core.errors import ProviderError, retry_after_from_headers
from evalkit.core.types import RateInfo
from evalkit.providers.wire.rate_headers import rate_info
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.machinery.limits import HiddenLimits


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


# ------------------------------------------------------------------ the limiter applies it


async def test_the_limiter_spaces_requests_at_the_announced_rate():
    clock = FakeClock()
    limiter = Limiter(rpm=None, tpm=None, concurrency=64, clock=clock)
    limiter.adapt_rates()
    assert limiter.learned_line() is None
    limiter.observe(refused=False, info=RateInfo(requests_per_min=600))  # 10/s announced → 9.7/s
    start = clock.now()
    for _ in range(50):
        async with limiter.slot(1):
            pass
    rate = 50 / (clock.now() - start)
    assert 9.0 < rate < 11.5
    assert "9.7/s (headers)" in limiter.learned_line()


async def test_the_limiter_pauses_everyone_when_a_window_is_used_up():
    clock = FakeClock()
    limiter = Limiter(rpm=None, tpm=None, concurrency=8, clock=clock)
    limiter.adapt_rates()
    limiter.observe(refused=True, info=RateInfo(requests_per_min=6000, requests_left=0, requests_reset_s=3.0))
    start = clock.now()
    async with limiter.slot(1):
        pass
    assert clock.now() - start == pytest.approx(3.0, abs=0.05)


async def test_a_limiter_that_does_not_adapt_ignores_what_it_is_told():
    clock = FakeClock()
    limiter = Limiter(rpm=None, tpm=None, concurrency=8, clock=clock)
    limiter.observe(refused=True, info=RateInfo(requests_per_min=60, requests_left=0, requests_reset_s=30.0))
    start = clock.now()
    for _ in range(20):
        async with limiter.slot(1):
            pass
    assert clock.now() == start


# ------------------------------------------------------------------ against a hidden limit, on virtual time


@dataclass
class Served:
    """What one simulated run against a hidden limit came to."""

    requests: int = 0
    refused: int = 0
    answered: int = 0
    failed: int = 0
    seconds: float = 0.0  # virtual
    learned: dict | None = None

    @property
    def refused_share(self) -> float:
        return self.refused / self.requests


def against_hidden_limit(monkeypatch, headers: str, *, adaptive: bool, n: int = 250, rps: float = 50,
                         concurrency: int = 32, max_attempts: int = 100, seed: int = 1) -> Served:
    """n queries, `concurrency` at a time, through the runner's Limiter and retry policy (with_retries) against
    the simulator's hidden limit (HiddenLimits: rps requests/s, announced in `headers`' dialect), all on
    virtual time (tests/ask/fake_clock.py): each request travels 0.5-2 ms to the server, which refuses it at once
    or answers 20 ms later, with the headers the server would send. The wire and the providers' reading of
    it are left to the end-to-end tests (test_adaptive_e2e.py); this is the policy, at the speed of
    arithmetic, the same on any machine."""
    monkeypatch.setattr(retry, "random", random.Random(seed))  # the backoff's jitter
    travel = random.Random(seed + 1)
    clock = VirtualTime()
    limits = HiddenLimits(SimFaults(rps=rps, rate_headers=headers), clock=clock.now)
    limiter = Limiter(concurrency=concurrency, clock=clock)
    if adaptive:
        limiter.adapt_rates()
    policy = RetryPolicy(max_attempts=max_attempts)
    served = Served()

    async def call() -> SimpleNamespace:
        served.requests += 1
        await clock.sleep(travel.uniform(0.0005, 0.002))
        wait = limits.admit_request()
        if wait > 0:
            served.refused += 1
            said = {**limits.retry_after(wait), **limits.headers()}
            raise ProviderError("rate_limit", "429", status=429, retry_after=retry_after_from_headers(said),
                                limits=rate_info(said))
        await clock.sleep(0.02)
        return SimpleNamespace(limits=rate_info(limits.headers()))

    async def one() -> None:
        try:
            await with_retries(call, policy, limiter)
            served.answered += 1
        except ProviderError:
            served.failed += 1

    asyncio.run(clock.run([one() for _ in range(n)]))
    served.seconds, served.learned = clock.now(), limiter.learned()
    return served


def test_announced_limits_are_followed_on_virtual_time(monkeypatch):
    """250 queries against 50 requests/s announced in OpenAI's headers: the first wave (32, sent before any
    reply) is mostly refused, then hardly anything; the run takes the 5 s the limit allows."""
    served = against_hidden_limit(monkeypatch, "openai", adaptive=True)
    assert served.answered == 250 and served.refused <= 32 + 0.05 * served.requests, served
    assert served.learned == {"source": "headers", "rpm": pytest.approx(50 * 60 * MARGIN, abs=0.1)}
    assert 250 / 50 * 0.95 <= served.seconds <= 250 / 50 * 1.1, served


def test_without_adaptation_the_same_run_is_mostly_refused_on_virtual_time(monkeypatch):
    served = against_hidden_limit(monkeypatch, "openai", adaptive=False, max_attempts=8)  # the default
    assert served.refused > 2 * served.answered and served.learned is None, served


def test_without_headers_aimd_finds_the_rate_on_virtual_time(monkeypatch):
    """No rate headers, not even Retry-After (vLLM behind a proxy): AIMD from the 429s alone refuses a
    fraction of what the same run refuses without it, and takes about the time the limit allows."""
    adaptive = against_hidden_limit(monkeypatch, "none", adaptive=True)
    plain = against_hidden_limit(monkeypatch, "none", adaptive=False)
    assert adaptive.answered == plain.answered == 250
    assert adaptive.refused < 0.35 * plain.refused, (adaptive, plain)
    assert adaptive.refused_share < 1 / 3, adaptive
    assert adaptive.learned["source"] == "aimd" and 0.5 * 50 * 60 < adaptive.learned["rpm"] < 1.5 * 50 * 60
    assert adaptive.seconds <= 250 / 50 * 1.2 < plain.seconds, (adaptive, plain)
