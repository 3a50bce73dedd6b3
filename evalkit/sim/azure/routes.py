"""What an Azure OpenAI resource checks before it reads a body, and its model list.

- Classic routes (`/openai/...` outside `/openai/v1/`) need the `api-version` query parameter:
  without it, 404 "Resource not found", as the real endpoint answers.
- When the server has an API key, Azure's routes take it in the `api-key` header, or a Microsoft
  Entra ID token as `Authorization: Bearer` (SimConfig.entra_token); the key as a bearer token is
  not accepted. Anything else: Azure's 401.
- `GET /openai/models` and `GET /openai/v1/models` list the base models the resource offers,
  never its deployments (learn.microsoft.com/azure/ai-foundry/openai/reference, read 2026-11-26).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from evalkit.sim.extension import route_path
from evalkit.sim.machinery.state import SimConfig

PREFIX = "/openai/"
V1_PREFIX = "/openai/v1/"
BASE_MODELS = ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini")
DENIED = ("Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
          "for an active subscription and use a correct regional API endpoint for your resource.")


def owns(request: web.Request) -> bool:
    """An Azure route (or a twin of one): its credentials are checked here, not by the generic check."""
    return route_path(request).startswith(PREFIX)


def credentialed(request: web.Request, config: SimConfig) -> bool:
    """The key in `api-key`, or the Entra ID token as a bearer token (no key configured: anyone)."""
    if not config.api_key:
        return True
    if request.headers.get("api-key") == config.api_key:
        return True
    token = config.entra_token
    return bool(token) and request.headers.get("Authorization") == f"Bearer {token}"


def azure_gate(config: SimConfig) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Middleware: Azure's 404 without an api-version on classic routes, then its 401."""

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        path = route_path(request)
        if not path.startswith(PREFIX):
            return await handler(request)
        if not path.startswith(V1_PREFIX) and "api-version" not in request.query:
            return web.json_response({"error": {"code": "404", "message": "Resource not found"}}, status=404)
        if not credentialed(request, config):
            return web.json_response({"error": {"code": "401", "message": DENIED}}, status=401)
        return await handler(request)

    return gate


async def handle_models(request: web.Request) -> web.Response:
    """The base models, each as Azure describes one (deployments are not models: none is listed)."""
    created = int(time.time()) - 86400
    data = [{"id": name, "object": "model", "status": "succeeded", "created_at": created,
             "lifecycle_status": "generally-available",
             "capabilities": {"chat_completion": True, "completion": False, "embeddings": False,
                              "fine_tune": False, "inference": True},
             "deprecation": {"inference": created + 365 * 86400}} for name in BASE_MODELS]
    return web.json_response({"object": "list", "data": data})


def add_azure_routes(app: web.Application) -> None:
    """Azure's model lists (its chat routes are the dialect's, its batch routes OpenAI's: batch_routes)."""
    app.router.add_get("/openai/models", handle_models)
    app.router.add_get("/openai/v1/models", handle_models)
