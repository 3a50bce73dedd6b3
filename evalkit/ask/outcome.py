"""What one request can come back as, before the runner records it: counted, repaired, or classified.

Kept apart from the runner so the batch pool and the spending hook can name these without the runner.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.core.errors import ProviderError, server_reason
from evalkit.core.text.surrogates import repaired
from evalkit.core.types import Response


@dataclass
class RunnerStats:
    sent: int = 0
    attempts: int = 0
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    rate_limited: int = 0  # 429s received (each retried), counted as they come
    capacity_refused: int = 0  # a service tier's capacity refusals (ask.capacity): not 429s of the account
    tier_fallbacks: int = 0  # queries sent at standard after their tier's wait (--tier-fallback standard)
    input_tokens: int = 0
    output_tokens: int = 0


def writable(response: Response) -> Response:
    """The response with no lone surrogate in its strings (U+FFFD instead, core.text.surrogates): every answer,
    live or from a batch, passes here before the cache and records.jsonl write it as UTF-8."""
    response.text = repaired(response.text)
    for name in ("reasoning", "finish_reason", "served_by", "served_tier", "error_message", "via"):
        value = getattr(response, name)
        if isinstance(value, str):
            setattr(response, name, repaired(value))
    return response


class NotSent(Exception):
    """The run's `stop` said so while this query waited for a request slot: it is left for a later run
    (run() has more workers than slots, so a query may wait there after the budget is spent)."""


def unclassified(provider: str, error: Exception) -> ProviderError:
    """An exception an adapter did not classify (an unforeseen reply, or a bug): never a dead worker with
    answers unsaved, and never retried (a bug would be paid for on every attempt)."""
    text = server_reason(error)
    return ProviderError("permanent", f"unexpected {type(error).__name__} in the {provider} adapter"
                                      f"{': ' + text if text else ''} (please report it)")
