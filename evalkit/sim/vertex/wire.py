"""Vertex AI's model routes for the simulated server: Gemini's generateContent and Claude's rawPredict.

- Gemini: `POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent`,
  the Gemini API's body and reply (evalkit.sim.gemini); Vertex's errors carry no RetryInfo on a
  429 (RESOURCE_EXHAUSTED, "Resource exhausted. Please try again later.").
- Claude: `POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict`, the Messages
  body without `model` (it is in the path) and with `anthropic_version: vertex-2023-10-16`, else 400
  (docs.claude.com "Claude on Vertex AI", read 2026-11-27); the reply is Anthropic's. What Vertex itself
  refuses is in Google's shape: a 429 quota error and a 404 for an unknown publisher model; what the
  model refuses (overloaded, a bad body) in Anthropic's.

Credentials are checked before a body is read (evalkit.sim.vertex.routes).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from evalkit.sim.anthropic import AnthropicDialect, AnthropicRequest
from evalkit.sim.gemini import GeminiDialect
from evalkit.sim.machinery.tiers import header_tier
from evalkit.sim.machinery.wire import BadRequest, ParsedRequest

_PLACE = "/projects/{project}/locations/{location}/publishers"
GEMINI_ROUTE = r"/{version:v1|v1beta1}" + _PLACE + r"/google/models/{model:[^/:]+}:generateContent"
CLAUDE_ROUTE = r"/v1" + _PLACE + r"/anthropic/models/{model:[^/:]+}:rawPredict"
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
TIER_HEADER = "X-Vertex-AI-LLM-Shared-Request-Type"  # Flex and Priority PayGo (docs.cloud.google.com, 2026-11-29)
TRAFFIC = {"standard": "ON_DEMAND", "flex": "ON_DEMAND_FLEX", "priority": "ON_DEMAND_PRIORITY"}  # usageMetadata
EXHAUSTED = ("Resource exhausted. Please try again later. Please refer to "
             "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.")


def google_error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """An error as Google's APIs shape one."""
    return web.json_response({"error": {"code": status, "message": message, "status": code}}, status=status,
                             headers=headers)


def not_found(message: str, publisher: str) -> web.Response:
    """Vertex's 404 for a model it does not serve (the server's message names the model in backquotes)."""
    model = message.split("`")[1] if message.count("`") >= 2 else "unknown"
    return google_error(404, "NOT_FOUND", f"Publisher Model `publishers/{publisher}/models/{model}` was not found "
                                          "or your project does not have access to it.")


class VertexGeminiDialect(GeminiDialect):
    """Gemini on Vertex AI: the Gemini API's shapes on Vertex's route, Vertex's 429 and 404."""

    name = "vertex-gemini"
    routes = (GEMINI_ROUTE,)

    def asked_tier(self, body: Any, request: web.Request) -> str | None:
        """Vertex names a tier in a header of its own (the reply in trafficType)."""
        return header_tier(request, TIER_HEADER)

    @staticmethod
    def tier_headers(req: ParsedRequest) -> dict[str, str] | None:
        """No x-gemini-service-tier header (the Gemini API's): Vertex says the tier in trafficType."""
        return None

    @staticmethod
    def tier_usage(req: ParsedRequest) -> dict[str, str]:
        """Vertex's `usageMetadata.trafficType`, the tier that served it, where a tier was asked."""
        return {} if req.service_tier is None else {"trafficType": TRAFFIC.get(req.service_tier, "ON_DEMAND")}

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        if kind == "rate_limit":
            return google_error(429, "RESOURCE_EXHAUSTED", EXHAUSTED, headers)
        if kind == "not_found":
            return not_found(message, "google")
        return super().error(status, kind, message, headers)


class VertexClaudeDialect(AnthropicDialect):
    """Claude on Vertex AI's rawPredict (module docstring)."""

    name = "vertex-claude"
    routes = (CLAUDE_ROUTE,)

    def parse(self, body: Any, request: web.Request) -> AnthropicRequest:
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        if "model" in body:
            raise BadRequest("model: Extra inputs are not permitted (the model is in the URL on Vertex AI)")
        version = body.get("anthropic_version")
        if version != VERTEX_ANTHROPIC_VERSION:
            raise BadRequest(f"anthropic_version: must be {VERTEX_ANTHROPIC_VERSION!r}, not {version!r}")
        rest = {k: v for k, v in body.items() if k != "anthropic_version"}
        # the model from the path, for the parse and for the server's per-request counters
        body["model"] = request.match_info.get("model", "")
        return super().parse({**rest, "model": body["model"]}, _Unversioned(request))

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        if kind == "rate_limit":
            return google_error(429, "RESOURCE_EXHAUSTED", EXHAUSTED, headers)
        if kind == "not_found":
            return not_found(message, "anthropic")
        return super().error(status, kind, message, headers)


class _Unversioned:
    """A request seen without an `anthropic-version` header: on Vertex AI the body's anthropic_version
    (vertex-2023-10-16, which takes sampling parameters) governs, whatever header a client adds."""

    def __init__(self, request: web.Request) -> None:
        self.match_info = request.match_info
        self.headers: dict[str, str] = {}
