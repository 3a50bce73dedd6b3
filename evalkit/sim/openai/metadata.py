"""The routes that describe the simulated server rather than answer questions: the OpenAI-style
model list and one model's metadata, `/version` and `/health` (Azure's and OpenRouter's lists are
with their other routes)."""

from __future__ import annotations

import time

from aiohttp import web

from evalkit.core.version import __version__
from evalkit.sim.machinery.state import SIM_OWNER, STATE


async def handle_models(request: web.Request) -> web.Response:
    """vLLM's model list (`owned_by` as configured: "vllm" is what vLLM says). `evalkit_sim` names the
    simulator whatever its owned_by, and says whether other names are served too (not strict_model); a
    lenient server does not say so, as llama.cpp's server, TGI, Ollama and LiteLLM do not."""
    config = request.app[STATE].config
    entry = {"id": config.served_model_name, "object": "model", "created": int(time.time()),
             "owned_by": config.owned_by}
    about = {"lenient": True} if config.lenient else {"strict_model": config.strict_model}
    return web.json_response({"object": "list", "data": [entry], "evalkit_sim": about})


async def handle_model_lookup(request: web.Request) -> web.Response:
    """One model's metadata, as OpenAI (`GET /v1/models/{id}`), Anthropic (the same path) and Gemini
    (`GET /v1beta/models/{model}`) answer it: the fields of all three in one object. 404 for a name
    it does not serve (only with strict_model)."""
    config = request.app[STATE].config
    name = request.match_info["model"]
    if config.strict_model and name != config.served_model_name:
        return web.json_response({"error": {"code": 404, "type": "not_found_error", "status": "NOT_FOUND",
                                            "message": f"model: {name}"}}, status=404)
    return web.json_response({"id": name, "object": "model", "type": "model", "display_name": name,
                              "created": int(time.time()), "created_at": "2026-01-01T00:00:00Z",
                              "name": f"models/{name}", "displayName": name, "owned_by": SIM_OWNER})


async def handle_version(request: web.Request) -> web.Response:
    """vLLM's `GET /version`, naming the simulator."""
    return web.json_response({"version": f"evalkit-sim {__version__}"})


async def handle_health(request: web.Request) -> web.Response:
    return web.Response(text="")



def add_metadata_routes(app: web.Application) -> None:
    app.router.add_get("/v1/models", handle_models)
    app.router.add_get(r"/{version:v1|v1beta|v1alpha}/models/{model:[^/:]+}", handle_model_lookup)
    app.router.add_get("/health", handle_health)
    app.router.add_get("/version", handle_version)
