"""One request under the retry policy: the single place where retries, pauses and timeouts live.

Each attempt runs inside a limiter slot and a per-request timeout. Rate limits pause the whole
limiter for Retry-After (or default_pause_s); transient, timeout and empty-content errors back
off with exponential jitter and retry; permanent and refused errors raise at once. Used by the
chat runner and by the image editor alike.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

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
    default_pause_s: float = 1.0  # a 429 without Retry-After still pauses the limiter this long


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


async def _within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """await with a timeout; asyncio.timeout (3.11+) needs no extra task per request."""
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:  # Python 3.10
        return await asyncio.wait_for(awaitable, timeout_s)
    async with timeout(timeout_s):
        return await awaitable


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy, limiter: Limiter, *,
                       est_tokens: int = 0, tokens_of: Callable[[T], int] | None = None,
                       on_attempt: Callable[[int], None] | None = None) -> T:
    """One request under the retry policy, each attempt inside a limiter slot and a timeout.

    Rate limits pause the whole limiter for Retry-After (or default_pause_s); transient, timeout
    and empty errors back off and retry; permanent and refused raise at once. The last
    ProviderError is re-raised when the attempts are spent.
    """
    attempt = 0
    while True:  # a plain loop: tenacity's machinery cost more CPU per request than the request itself
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
                    if e.kind == "rate_limit":
                        limiter.pause(e.retry_after if e.retry_after is not None else policy.default_pause_s)
                    raise
                if tokens_of is not None:
                    slot.report_tokens(tokens_of(result))
                return result
        except ProviderError as e:
            if not _retryable(e) or attempt >= policy.max_attempts:
                raise
        await asyncio.sleep(backoff_s(policy, attempt))
