"""A tier's capacity refusal on virtual time (issue 45, item 1; evalkit/ask/capacity.py): the adaptive
limiter is never told of it (its state and rate stay as they were, where the same number of quota 429s cut
it), it does not spend max_attempts, its waits double up to their cap, and all of one query's waits together
stop at capacity_wait_s (--tier-wait), after which the refusal is raised for the runner to record or to send
at standard. The end-to-end runs are tests/providers/test_tier_capacity.py."""

from __future__ import annotations

import pytest
from fake_clock import FakeClock

from evalkit.ask import capacity
from evalkit.ask.capacity import as_capacity, is_capacity
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy, with_retries
from evalkit.core.errors import ProviderError

RESOURCE_UNAVAILABLE = "HTTP 429: Resource Unavailable: flex processing has no capacity right now"


@pytest.fixture
def ceiling(monkeypatch):
    """Capacity waits take the top of their jitter range, so waits are exact numbers."""
    monkeypatch.setattr(capacity.random, "uniform", lambda low, high: high)


def refusing(clock: FakeClock, kind: str, refusals: int, log: list[float]):
    """A call answering `refusals` times with a 429 of `kind` (one second of work each), then "ok"."""
    async def call() -> str:
        log.append(clock.now())
        await clock.sleep(1.0)
        if len(log) <= refusals:
            raise ProviderError(kind, RESOURCE_UNAVAILABLE, status=429)
        return "ok"
    return call


async def _run(kind: str, refusals: int, policy: RetryPolicy) -> tuple[Limiter, list[float], list[bool], object]:
    """One query under `policy`: the limiter, when each try started, what the limiter was told (refused or
    not, in order), and the result."""
    clock = FakeClock()
    limiter = Limiter(concurrency=4, clock=clock)
    limiter.adapt_rates()
    told: list[bool] = []
    observe = limiter.observe
    limiter.observe = lambda *, refused, info=None: (told.append(refused), observe(refused=refused, info=info))[1]
    starts: list[float] = []
    [out] = await clock.run([with_retries(refusing(clock, kind, refusals, starts), policy, limiter)])
    return limiter, starts, told, out


async def test_capacity_refusals_leave_the_adaptive_limiter_as_it_was_where_quota_429s_cut_it(ceiling):
    policy = RetryPolicy(max_attempts=3, initial_s=0.1, max_s=0.1, capacity_initial_s=0.5, capacity_max_s=2.0,
                         capacity_wait_s=100.0)
    limiter, starts, told, out = await _run("capacity", 12, policy)
    assert out == "ok" and len(starts) == 13  # 12 refusals: more than max_attempts, none spent
    assert told == [False]  # only the answer was observed
    assert list(limiter.adaptive._replies) == [(starts[-1] + 1.0, False)]
    assert limiter.adaptive.rpm is None and limiter.learned() is None and limiter.paused_until == float("-inf")
    # waits: 0.5, 1, 2, then the cap (2) — each after the one second of work the refusal took
    gaps = [round(b - a - 1.0, 6) for a, b in zip(starts, starts[1:], strict=False)]
    assert gaps == [0.5, 1.0, 2.0] + [2.0] * 9

    quota = RetryPolicy(max_attempts=13, initial_s=0.0, max_s=0.0)
    limiter, starts, told, out = await _run("rate_limit", 12, quota)
    assert out == "ok" and told == [True] * 12 + [False]  # the account's 429s: each one told


async def test_a_query_s_capacity_waits_stop_at_the_tier_wait_and_the_refusal_is_raised(ceiling):
    policy = RetryPolicy(capacity_initial_s=1.0, capacity_max_s=4.0, capacity_wait_s=10.0)
    with pytest.raises(ProviderError) as refused:
        await _run("capacity", 100, policy)
    assert refused.value.kind == "capacity"
    with pytest.raises(ProviderError):  # no wait allowed: raised at the first refusal
        await _run("capacity", 1, RetryPolicy(capacity_wait_s=0.0))
    # waits 1, 2, 4, then 3 (what is left of 10 s): 5 tries; the 5th refusal finds nothing left
    policy_log: list[float] = []
    clock = FakeClock()
    limiter = Limiter(concurrency=1, clock=clock)
    with pytest.raises(ProviderError):
        await clock.run([with_retries(refusing(clock, "capacity", 100, policy_log), policy, limiter)])
    gaps = [round(b - a - 1.0, 6) for a, b in zip(policy_log, policy_log[1:], strict=False)]
    assert gaps == [1.0, 2.0, 4.0, 3.0]


@pytest.mark.parametrize("status, message, tier, expected", [
    (429, RESOURCE_UNAVAILABLE, "flex", True),  # OpenAI's flex
    (429, "HTTP 429: Rate limit reached for requests", "flex", False),  # the account's limit, even at flex
    (429, RESOURCE_UNAVAILABLE, None, False),  # no tier asked: never this outcome
    (429, RESOURCE_UNAVAILABLE, "standard", False),
    (498, "HTTP 498: capacity_exceeded", "flex", True),  # Groq's flex
    (503, "HTTP 503: UNAVAILABLE: The model is overloaded.", "flex", True),  # a shed flex request (Gemini)
    (503, "HTTP 503: UNAVAILABLE: The model is overloaded.", "priority", False),
    (400, "HTTP 400: Flex processing is not available for this model", "flex", False),  # Azure's: permanent
])
def test_which_refusals_are_a_tier_s_capacity(status, message, tier, expected):
    kind = {429: "rate_limit", 400: "permanent"}.get(status, "transient")
    error = ProviderError(kind, message, status=status)
    assert is_capacity(error, tier) is expected
    assert as_capacity(error, tier).kind == ("capacity" if expected else kind)
