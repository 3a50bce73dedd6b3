"""One request under the retry policy: the single place where retries, waits and timeouts live.

Each attempt runs inside a limiter slot and a per-request timeout. Permanent and refused errors
raise at once; every other error is retried until max_attempts, the slot released while waiting:

- a rate limit (429) makes only the refused request wait, and counts as an attempt. It waits the
  server's Retry-After, capped at max_retry_after_s (a header of 999999 s or "inf" must not stall a
  run, and --timeout does not cover waits between attempts), or, when the server named no usable
  time, the same exponential-jitter backoff as other errors. Other requests go on meanwhile: one
  429 among 128 requests in flight says little about the rest, and pausing the whole client a
  second for each kept a faulty run at --concurrency 128 below 15 requests in flight. Slowing
  everyone down is the job of adaptive limits (Limiter.pause stays for them), not of one refusal.
- transient, timeout and empty-content errors back off with exponential jitter.
- a tier's capacity refusal (kind "capacity", ask.capacity: a flex request the provider had no room for)
  is not a quota signal: the limiter is not told (its learned rate stays), the breaker takes it as a sign
  of life, and it does not spend max_attempts. It waits its own back-off (capacity_initial_s doubling up to
  capacity_max_s, equal jitter), and once capacity_wait_s of such waits are spent the refusal is raised
  (the runner then records it, or sends the query at standard with --tier-fallback standard).

Waits go through the limiter's clock, so tests run them on virtual time. Used by the chat runner
and by the image editor alike.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from evalkit.ask.breaker import Breaker
from evalkit.ask.capacity import CAPACITY, capacity_wait_s
from evalkit.ask.rate_limiter import Limiter
from evalkit.core.errors import ProviderError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries for rate-limit, transient, timeout and empty-content errors; none for permanent."""

    max_attempts: int = 8
    initial_s: float = 0.5
    max_s: float = 20.0
    timeout_s: float = 120.0
    max_retry_after_s: float = 60.0  # the longest Retry-After a refused request waits (--max-retry-after)
    capacity_initial_s: float = 5.0  # a tier's capacity refusal: the first back-off's ceiling (ask.capacity)
    capacity_max_s: float = 120.0  # ... and the longest single wait
    capacity_wait_s: float = 900.0  # ... and all of one query's such waits together (--tier-wait)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


def backoff_s(policy: RetryPolicy, attempt: int) -> float:
    """The pause after failed attempt `attempt` (1-based): full jitter over an exponential ceiling,
    uniform(0, min(max_s, initial_s * 2 ** (attempt - 1))) (tenacity's wait_random_exponential)."""
    try:
        ceiling = min(policy.max_s, policy.initial_s * 2 ** (attempt - 1))
    except OverflowError:
        ceiling = policy.max_s
    return random.uniform(0, max(0.0, ceiling))


def rate_limit_wait_s(policy: RetryPolicy, retry_after: float | None, attempt: int) -> float:
    """How long a request refused with a 429 waits: Retry-After capped at max_retry_after_s, or the
    backoff when there is none. Providers may hand over anything a header said (inf, nan, < 0)."""
    if retry_after is None or math.isnan(retry_after):
        return backoff_s(policy, attempt)
    cap = policy.max_retry_after_s if policy.max_retry_after_s > 0 else 0.0  # nan or < 0: no wait
    return min(max(0.0, retry_after), cap)


async def _within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """await with a timeout; asyncio.timeout (3.11+) needs no extra task per request."""
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:  # Python 3.10
        return await asyncio.wait_for(awaitable, timeout_s)
    async with timeout(timeout_s):
        return await awaitable


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy, limiter: Limiter, *,
                       est_tokens: int = 0, tokens_of: Callable[[T], int] | None = None,
                       on_attempt: Callable[[int], None] | None = None, breaker: Breaker | None = None) -> T:
    """One request under the retry policy, each attempt inside a limiter slot and a timeout.

    A 429 delays this request alone (capped Retry-After, else backoff); transient, timeout and
    empty errors back off and retry; permanent and refused raise at once. The last ProviderError
    is re-raised when the attempts are spent, without waiting first. Every attempt is shown to the
    `breaker`; once it has tripped, the last error is re-raised instead of another attempt.
    """
    attempt = 0
    refusals = 0  # capacity refusals: they do not spend max_attempts, their waits are bounded apart
    waited = 0.0  # seconds waited after capacity refusals
    last: ProviderError | None = None
    while True:  # a plain loop: tenacity's machinery cost more CPU per request than the request itself
        if last is not None and breaker is not None and breaker.tripped:
            raise last  # it tripped while this request waited to retry
        attempt += 1
        if on_attempt is not None:
            on_attempt(attempt)
        try:
            async with limiter.slot(est_tokens) as slot:
                try:
                    result = await _within(call(), policy.timeout_s)
                except asyncio.TimeoutError as e:
                    slot.report_tokens(0)
                    raise ProviderError("timeout", f"no answer within {policy.timeout_s:g}s") from e
                except ProviderError as e:
                    slot.report_tokens(0)
                    if e.kind != CAPACITY and (e.kind == "rate_limit" or e.limits is not None):
                        limiter.observe(refused=e.kind == "rate_limit", info=e.limits)
                    raise
                limiter.observe(refused=False, info=getattr(result, "limits", None))  # adaptive limits learn
                if tokens_of is not None:
                    slot.report_tokens(tokens_of(result))
                if breaker is not None:
                    breaker.success()
                return result
        except ProviderError as e:
            last = e
            if breaker is not None:
                breaker.failure(e)
            if e.kind == CAPACITY:
                refusals += 1
                left = policy.capacity_wait_s - waited
                if left <= 0 or (breaker is not None and breaker.tripped):
                    raise
                wait = capacity_wait_s(policy.capacity_initial_s, policy.capacity_max_s, refusals, e.retry_after, left)
                waited += wait
                await limiter.clock.sleep(wait)
                continue
            if not _retryable(e) or attempt - refusals >= policy.max_attempts or \
                    (breaker is not None and breaker.tripped):
                raise
            wait = rate_limit_wait_s(policy, e.retry_after, attempt - refusals) if e.kind == "rate_limit" \
                else backoff_s(policy, attempt - refusals)
        await limiter.clock.sleep(wait)
