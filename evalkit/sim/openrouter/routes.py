"""What OpenRouter checks and announces around a chat completion, and its account routes.

- Its API routes take the key as `Authorization: Bearer` only (when the server has one): else 401.
- Prepaid credits (SimState.credits): a chat request made when none remain is refused with 402 before
  anything else happens, and is no completion; `POST /sim/credits` `{"credits": X}` tops them up.
- Rate limits are announced as `X-RateLimit-Limit` / `-Remaining` / `-Reset` (epoch milliseconds)
  (openrouter.ai/docs/limits, read 2026-11-26), on a 429 also copied into the error's
  `metadata.headers`, where OpenRouter's 429 bodies carry them; whatever limit headers the shared
  code added in another provider's names are translated.
  A 429 always carries them (unless rate_headers is "none"); other replies when rate_headers names a
  provider and a requests-per-second limit is set.
- `GET /api/v1/key`: the key's credit limit, what remains and what it spent; `GET /api/v1/models`: the
  catalogue, the served model included, priced at SimConfig.openrouter_price.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

from aiohttp import web

from evalkit.sim.extension import route_path
from evalkit.sim.machinery.state import STATE, SimState
from evalkit.sim.openrouter.wire import CHAT

PREFIX = "/api/v1/"
OPEN_ROUTES = ("/api/v1/models",)  # the catalogue is public
CATALOGUE = ("openai/gpt-4o", "openai/gpt-4.1", "anthropic/claude-sonnet-4.5", "google/gemini-2.5-flash")
NO_CREDITS = ("Insufficient credits. This account never purchased credits. Make sure your key is on the correct "
              "account or org, and if so, purchase more at https://openrouter.ai/settings/credits")
_FOREIGN_LIMITS = ("x-ratelimit-", "anthropic-ratelimit-")


def owns(request: web.Request) -> bool:
    """An OpenRouter route (or a twin of one): its credentials are checked here."""
    return route_path(request).startswith(PREFIX)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


def _unauthorised(request: web.Request, key: str | None) -> web.Response | None:
    if not key or request.headers.get("Authorization") == f"Bearer {key}":
        return None
    return _error(401, "User not found." if request.headers.get("Authorization") else "No auth credentials found")


def rate_headers(state: SimState, response: web.Response) -> dict[str, str]:
    """OpenRouter's limit headers for a reply, from the hidden requests-per-second limit (and a 429's
    Retry-After when no such limit is set: then the limit itself is unknown and not sent)."""
    faults, bucket = state.config.faults, state.limits.requests
    limited = response.status == 429
    if faults.rate_headers == "none" or not (limited or (faults.rate_headers and bucket is not None)):
        return {}
    out: dict[str, str] = {}
    reset_s = 0.0
    if bucket is not None:
        level = bucket.level()
        out["X-RateLimit-Limit"] = str(int(bucket.rps * 60))
        out["X-RateLimit-Remaining"] = str(max(0, int(level)))
        reset_s = max(0.0, (1.0 - level) / bucket.rps)
    if limited:
        out["X-RateLimit-Remaining"] = "0"
        try:
            reset_s = max(reset_s, float(response.headers.get("Retry-After", "1")))
        except ValueError:
            reset_s = max(reset_s, 1.0)
    out["X-RateLimit-Reset"] = str(math.ceil((time.time() + reset_s) * 1000))
    return out


def _announce(state: SimState, response: web.StreamResponse) -> None:
    """Put the limits in OpenRouter's names on a reply not yet sent (foreign names removed)."""
    if not isinstance(response, web.Response) or response.prepared:
        return
    for name in [n for n in response.headers if n.lower().startswith(_FOREIGN_LIMITS)]:
        del response.headers[name]
    headers = rate_headers(state, response)
    response.headers.update(headers)
    if response.status == 429 and headers and isinstance(response.body, bytes):
        try:
            payload = json.loads(response.body)
        except ValueError:
            return
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            payload["error"].setdefault("metadata", {})["headers"] = headers
            response.body = json.dumps(payload).encode()


@web.middleware
async def openrouter_gate(request: web.Request, handler: Any) -> web.StreamResponse:
    """Middleware: OpenRouter's 401, its 402 when no credits remain, its limit headers."""
    path = route_path(request)
    if not path.startswith(PREFIX):
        return await handler(request)
    state = request.app[STATE]
    if path not in OPEN_ROUTES:
        refused = _unauthorised(request, state.config.api_key)
        if refused is not None:
            return refused
    if path == CHAT and state.credits.exhausted():
        return _error(402, NO_CREDITS)
    response = await handler(request)
    _announce(state, response)
    return response


def _label(key: str | None) -> str:
    """A key's label as OpenRouter shows one, made from its hash (the key itself is never repeated)."""
    digest = hashlib.sha256((key or "").encode()).hexdigest()
    return f"sk-or-v1-{digest[:3]}...{digest[-3:]}"


async def handle_key(request: web.Request) -> web.Response:
    """`GET /api/v1/key`: the current key's credit limit, what remains of it and what it spent."""
    state = request.app[STATE]
    credits = state.credits
    return web.json_response({"data": {
        "label": _label(state.config.api_key), "limit": credits.limit, "limit_remaining": credits.remaining,
        "limit_reset": None, "include_byok_in_limit": False, "usage": credits.spent, "is_free_tier": False,
        "is_provisioning_key": False}})


async def handle_models(request: web.Request) -> web.Response:
    """`GET /api/v1/models`: the catalogue, with the served model's name and per-token prices."""
    config = request.app[STATE].config
    per_in, per_out = config.openrouter_price
    names = dict.fromkeys((config.served_model_name, *CATALOGUE))
    created = int(time.time()) - 86400
    data = [{"id": name, "canonical_slug": name, "name": name, "created": created, "context_length": 128000,
             "architecture": {"modality": "text+image->text", "input_modalities": ["text", "image"],
                              "output_modalities": ["text"], "tokenizer": "Other", "instruct_type": None},
             "pricing": {"prompt": f"{per_in / 1e6:.10f}", "completion": f"{per_out / 1e6:.10f}",
                         "request": "0", "image": "0"},
             "top_provider": {"context_length": 128000, "max_completion_tokens": 16384, "is_moderated": False},
             "per_request_limits": None,
             "supported_parameters": ["max_tokens", "temperature", "top_p", "stop", "seed", "provider"]}
            for name in names]
    return web.json_response({"data": data})


async def handle_credits(request: web.Request) -> web.Response:
    """`POST /sim/credits` `{"credits": X}` sets what remains (null: unlimited); GET reads it."""
    credits = request.app[STATE].credits
    if request.method == "POST":
        try:
            value = (await request.json())["credits"]
            credits.set(None if value is None else float(value))
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"expected {{\"credits\": USD or null}}: {exc}"}, status=400)
    return web.json_response({"remaining": credits.remaining, "limit": credits.limit, "spent": credits.spent})


def add_openrouter_routes(app: web.Application) -> None:
    """OpenRouter's account routes and /sim/credits (its chat route is the dialect's, its checks
    openrouter_gate's)."""
    app.router.add_get("/api/v1/key", handle_key)
    app.router.add_get("/api/v1/models", handle_models)
    app.router.add_route("*", "/sim/credits", handle_credits)
