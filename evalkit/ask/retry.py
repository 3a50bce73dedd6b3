"""One request under the retry policy: the single place where retries, pauses and timeouts live.

Each attempt runs inside a limiter slot and a per-request timeout. Rate limits pause the whole
limiter for Retry-After (or default_pause_s); transient, timeout and empty-content errors back
off with exponential jitter and retry; permanent and refused errors raise at once. Used by the
chat runner and by the image editor alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

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


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy, limiter: Limiter, *,
                       est_tokens: int = 0, tokens_of: Callable[[T], int] | None = None,
                       on_attempt: Callable[[int], None] | None = None) -> T:
    """One request under the retry policy, each attempt inside a limiter slot and a timeout.

    Rate limits pause the whole limiter for Retry-After (or default_pause_s); transient, timeout
    and empty errors back off and retry; permanent and refused raise at once. The last
    ProviderError is re-raised when the attempts are spent.
    """
    retrying = AsyncRetrying(stop=stop_after_attempt(policy.max_attempts),
                             wait=wait_random_exponential(multiplier=policy.initial_s, max=policy.max_s),
                             retry=retry_if_exception(_retryable), reraise=True)
    async for attempt in retrying:
        with attempt:
            if on_attempt is not None:
                on_attempt(attempt.retry_state.attempt_number)
            async with limiter.slot(est_tokens) as slot:
                try:
                    result = await asyncio.wait_for(call(), policy.timeout_s)
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
    raise AssertionError("unreachable")  # pragma: no cover - reraise=True ends the loop by raising
