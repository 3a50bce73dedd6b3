"""What a simulated server does when a tier has no room (issue 45, item 1): flex requests refused for
capacity (a share of them, or every one once "capacity is gone"), and priority requests over the limit
served at standard, as the real services do.

- OpenAI's flex: HTTP 429 "Resource Unavailable", not charged (developers.openai.com/api/docs/guides/
  flex-processing, read 2026-11-29); the OpenAI-shaped dialects answer so (code `resource_unavailable`).
- Gemini's flex is "best-effort (sheddable)" (ai.google.dev/gemini-api/docs/optimization, read 2026-11-29):
  a shed request is 503 UNAVAILABLE; Gemini's priority over its limit is served at standard and says so only
  in the `x-gemini-service-tier` response header (ai.google.dev/gemini-api/docs/priority-inference).
- Bedrock: a flex request without room is 503 ServiceUnavailableException (a dialect's `capacity_status`).

Which requests are refused is fixed by their order, not by dice: of the first n flex requests,
floor(n × share) are refused, so a test knows how many refusals a run meets. The price of the tier served is
the client's business: the server only says which tier served.
"""

from __future__ import annotations

import math

CAPACITY_MESSAGE = ("Resource Unavailable: flex processing has no capacity for this request right now; you have "
                    "not been charged. Retry later, or send it at the default tier.")


def _nth_hit(share: float, n: int) -> bool:
    """Whether the n-th (1-based) event is one of the floor(n × share) that the share picks."""
    return n >= 1 and math.floor(n * share + 1e-9) > math.floor((n - 1) * share + 1e-9)


def capacity_refused(flex_refused: float, tier: str | None, nth: int) -> bool:
    """Whether the `nth` flex request is refused for capacity (`flex_refused`: the share refused, 1 = gone)."""
    return tier == "flex" and flex_refused > 0 and _nth_hit(flex_refused, nth)


def downgraded(priority_over: float, tier: str | None, nth: int) -> bool:
    """Whether the `nth` priority request is over the priority limit, so served at standard."""
    return tier == "priority" and priority_over > 0 and _nth_hit(priority_over, nth)
