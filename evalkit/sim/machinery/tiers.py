"""Service tiers as the simulated server sells them (issue 45, item 1): the request's tier read from its
body, a model (an Azure deployment) that does not offer flex refused as the real API refuses it, flex's
longer latency, and the tier each reply says served it.

The OpenAI-shaped dialects (OpenAI, Azure OpenAI, OpenRouter) name the tier in the body's `service_tier`
and echo the tier served in the reply's `service_tier` ("default" for standard), as OpenAI documents
(developers.openai.com/api/docs/guides/flex-processing, read 2026-11-29). Azure answers a model without
flex with HTTP 400 invalid_request_error and no fallback to standard
(learn.microsoft.com/azure/foundry/openai/how-to/flex-processing, read 2026-11-29). OpenRouter bills the
tier served: its reported cost is the simulator's price times the tier's share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

STANDARD_VALUES = ("default", "auto", "standard")  # what a request or reply says for the standard tier
NO_FLEX = ("Flex processing is not available for this model or deployment: requests that set service_tier "
           "to flex are processed only by models that support it, and do not fall back to Standard processing.")


@dataclass(frozen=True)
class SimTiers:
    """The tiers one simulated server sells. `flex_latency_s` is added to a flex request's latency (0: none;
    tests synchronise on the reply gate, not on time)."""

    sold: tuple[str, ...] = ("flex", "priority")  # the tiers it sells besides standard (wire values)
    no_flex: tuple[str, ...] = ()  # models (Azure deployments) that do not offer flex: HTTP 400, no fallback
    flex_latency_s: float = 0.0
    price_share: tuple[tuple[str, float], ...] = (("flex", 0.5), ("priority", 2.0))  # OpenRouter's billing
    flex_refused: float = 0.0  # the share of flex requests refused for capacity (1: capacity gone; tier_faults)
    priority_over: float = 0.0  # the share of priority requests over the limit: served at standard (tier_faults)

    def __post_init__(self) -> None:
        if self.flex_latency_s < 0:
            raise ValueError(f"flex latency must be 0 or more seconds, not {self.flex_latency_s}")
        for name in ("flex_refused", "priority_over"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a share between 0 and 1, not {getattr(self, name)}")

    def share(self, tier: str | None) -> float:
        """The served tier's price as a share of the standard price (1 for standard)."""
        return dict(self.price_share).get(tier or "", 1.0)


def requested_tier(body: Any, field: str = "service_tier") -> str | None:
    """The tier a body asks for (its `field`, a dotted path: `serviceTier.type` for Bedrock's Converse), in
    lower case; None when it names none."""
    value = body
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value.lower() if isinstance(value, str) and value else None


def header_tier(request: web.Request, name: str) -> str | None:
    """The tier a request names in its header `name` (Vertex's, Bedrock's InvokeModel), in lower case; None
    when it names none."""
    value = request.headers.get(name)
    return value.lower() if value else None


def tier_refusal(tiers: SimTiers, model: str, tier: str | None) -> str | None:
    """Why the server refuses the request's tier with 400 (None: served)."""
    if tier is None or tier in STANDARD_VALUES:
        return None
    if tier not in tiers.sold:
        return f"Invalid value for 'service_tier': {tier!r} is not a tier this server sells."
    if tier == "flex" and model in tiers.no_flex:
        return NO_FLEX
    return None


def served_value(tier: str | None) -> str:
    """The reply's `service_tier`: the tier served, "default" for standard."""
    return "default" if tier is None or tier in STANDARD_VALUES else tier
