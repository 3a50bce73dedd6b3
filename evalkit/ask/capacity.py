"""A service tier's "capacity unavailable" refusal (issue 45, item 1): recognised once, for every provider.

A flex request can be refused because the provider has no spare capacity for the tier just now, not because
the account sent too much. OpenAI answers it with HTTP 429 "Resource Unavailable" ("Flex processing may
sometimes lack sufficient resources to handle your requests, resulting in a 429 Resource Unavailable error
code. You will not be charged", developers.openai.com/api/docs/guides/flex-processing, read 2026-11-29);
Groq's flex tier with status 498 and error `capacity_exceeded` (console.groq.com/docs/flex-processing, read
2026-11-29); Gemini's flex tier is "best-effort (sheddable)" and a shed request comes back as 503 UNAVAILABLE
(ai.google.dev/gemini-api/docs/flex-inference and /optimization, read 2026-11-29: the page names no status;
503 is what Gemini's shed requests are answered with).

Such a refusal is its own outcome, kind "capacity": never a quota signal (the adaptive limiter does not learn
from it, the learned rate is unchanged), waited out with its own longer, bounded back-off (ask.retry), counted
apart in summary.json (`throughput.capacity_refused`), and with `--tier-fallback standard` the request is sent
at standard once `--tier-wait` seconds of those waits are spent (ask.runner). Providers stay thin: they
classify by status as ever; the runner, which knows the tier it asked for, renames the refusal here.
"""

from __future__ import annotations

import math
import random

from evalkit.core.errors import ProviderError
from evalkit.core.tiers import STANDARD

CAPACITY = "capacity"  # the ProviderError kind
CAPACITY_WORDS = ("resource unavailable", "resource_unavailable", "capacity")  # a 429 that names the tier's capacity
CAPACITY_STATUSES = (498,)  # Groq's "flex tier capacity exceeded"
SHED_STATUSES = (503,)  # a flex request shed (Gemini's UNAVAILABLE); at standard a 503 stays transient


def is_capacity(error: ProviderError, tier: str | None) -> bool:
    """Whether `error`, the answer to a request that asked `tier`, says the tier has no capacity now. A request
    at standard (or naming no tier) never gets this outcome: its 429 is the account's limit."""
    if tier is None or tier == STANDARD or error.kind in ("permanent", "refused", "exhausted"):
        return False
    if error.status in CAPACITY_STATUSES:
        return True
    if error.status == 429 and any(w in (error.message or "").lower() for w in CAPACITY_WORDS):
        return True
    return tier == "flex" and error.status in SHED_STATUSES


def as_capacity(error: ProviderError, tier: str | None) -> ProviderError:
    """The error renamed "capacity" when it is a capacity refusal of `tier` (the same object, else)."""
    if error.kind != CAPACITY and is_capacity(error, tier):
        error.kind = CAPACITY
        error.limits = None  # what a shed request announced says nothing of the account's limits
    return error


def capacity_wait_s(initial_s: float, max_s: float, refusal: int, retry_after: float | None,
                    left_s: float) -> float:
    """The pause after the `refusal`-th capacity refusal of one query: the server's Retry-After when it named
    a usable one, else an exponential back-off with equal jitter (half fixed, so the refusals of a run whose
    capacity is gone do not come back at once), capped by `max_s` and by what is left of --tier-wait."""
    if retry_after is not None and not math.isnan(retry_after):
        wait = min(max(0.0, retry_after), max_s)
    else:
        try:
            ceiling = min(max_s, initial_s * 2 ** (refusal - 1))
        except OverflowError:
            ceiling = max_s
        wait = random.uniform(ceiling / 2, ceiling)
    return max(0.0, min(wait, left_s))
