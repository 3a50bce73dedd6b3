"""OpenRouter's chat completions: OpenAI's shape under `/api/v1`, model ids with their vendor
(`openai/gpt-4o`), the upstream that answered, and what the request cost in credits.

Usage accounting (openrouter.ai/docs/use-cases/usage-accounting, read 2026-11-26): every reply's
`usage` carries `cost` (credits, 1 credit = 1 USD) and `cost_details`; the request's
`usage: {include: true}` is deprecated and changes nothing, so it is accepted and ignored.
Provider routing (openrouter.ai/docs/features/provider-routing, read 2026-11-26): the body's
`provider` object holds preferences (`order`, `allow_fallbacks`, ...); the first of `order` answers
here. Errors are `{"error": {"code": <status>, "message": ...}}`
(openrouter.ai/docs/errors, read 2026-11-26).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from evalkit.sim.machinery.wire import BadRequest, ParsedRequest, SimUsage, parse_body
from evalkit.sim.openai.dialect import OpenAIDialect

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState

CHAT = "/api/v1/chat/completions"
DEFAULT_UPSTREAM = "SimProvider"


@dataclass(frozen=True)
class RoutedRequest(ParsedRequest):
    """A parsed request and the upstream provider it is routed to."""

    upstream: str = DEFAULT_UPSTREAM


def cost_of(state: SimState, usage: SimUsage, tier: str | None = None) -> float:
    """Credits for one answer at the simulator's price (USD per million input and output tokens), times the
    served tier's share: OpenRouter bills "at the actual served tier's rate"."""
    per_in, per_out = state.config.openrouter_price
    return (usage.input_tokens * per_in + usage.output_tokens * per_out) / 1e6 * state.config.tiers.share(tier)


class OpenRouterDialect(OpenAIDialect):
    """OpenAI chat completions as OpenRouter answers them."""

    name = "openrouter"
    routes = (CHAT,)

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        req = parse_body(body)
        provider = body.get("provider")
        if provider is not None and not isinstance(provider, dict):
            raise BadRequest("'provider' must be an object of provider routing preferences")
        order = (provider or {}).get("order")
        first = order[0] if isinstance(order, list) and order and isinstance(order[0], str) else DEFAULT_UPSTREAM
        return RoutedRequest(**vars(req), upstream=first)

    def dress(self, state: SimState, req: ParsedRequest, reply: dict[str, Any], usage: SimUsage) -> dict[str, Any]:
        """The upstream that answered and the cost, which is taken from the credits."""
        cost = cost_of(state, usage, req.service_tier)
        state.credits.spend(cost)
        reply["id"] = reply["id"].replace("chatcmpl-", "gen-", 1)
        reply["provider"] = getattr(req, "upstream", DEFAULT_UPSTREAM)
        reply["usage"].update({"cost": cost, "is_byok": False, "cost_details": {"upstream_inference_cost": None}})
        return reply

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"error": {"code": status, "message": message}}, status=status, headers=headers)
