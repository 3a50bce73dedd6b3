"""One model request served: the rate limits, the fault dice and the simulated model's answer, shaped by
the request's dialect (evalkit.sim.dialects). Every model route of `evalkit sim` is `dialect_handler`;
the batch APIs answer their lines with `model_reply`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from evalkit.sim.answer_forms import asked_schema, structured_content
from evalkit.sim.machinery.counters import server_request_key
from evalkit.sim.machinery.dialect import Dialect, Handler
from evalkit.sim.machinery.image_cost import server_request_image_tokens
from evalkit.sim.machinery.inject import roll_fault
from evalkit.sim.machinery.state import STATE, SimState
from evalkit.sim.machinery.tier_faults import CAPACITY_MESSAGE, capacity_refused, downgraded
from evalkit.sim.machinery.tiers import tier_refusal
from evalkit.sim.machinery.wire import BadRequest, SimUsage, shape_reply
from evalkit.sim.model import sampling_of, server_estimate_tokens
from evalkit.sim.thinking import think, think_length, thinking_style


def dialect_handler(dialect: Dialect) -> Handler:
    """An aiohttp handler serving one wire format; faults, latency and the model are shared."""

    async def handle(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        state.counters.start()
        try:
            response = await _serve(request, state, dialect)
            if response.status == 200 and (request.transport is None or request.transport.is_closing()):
                state.counters.abandoned_reply()  # the client gave up waiting (its timeout): never delivered
            return response
        finally:
            state.counters.finish()

    return handle


async def _serve(request: web.Request, state: SimState, dialect: Dialect, *,
                 count_completion: bool = True) -> web.StreamResponse:
    counters, config = state.counters, state.config
    try:
        body = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        counters.status(400)
        return dialect.error(400, "bad_request", f"invalid JSON body: {exc}")
    limits = state.limits
    wait = limits.admit_request()
    if wait > 0:
        counters.status(429)
        return dialect.error(429, "rate_limit", "rate limit exceeded (rps)",
                             {**limits.retry_after(wait), **limits.headers()})
    try:
        req = dialect.parse(body, request)
        fps_info = [await state.image_info(u) for u in req.image_urls]
    except BadRequest as exc:  # (a status of its own: a model this route does not serve, sim/openai/only_responses)
        status = getattr(exc, "status", 400)
        counters.status(status)
        return dialect.error(status, "bad_request" if status == 400 else "invalid_request", str(exc))
    if config.strict_model and req.model != config.served_model_name:
        counters.status(404)
        return dialect.error(404, "not_found", f"The model `{req.model}` does not exist.")
    asked = getattr(dialect, "asked_tier", None)  # a dialect whose requests name a service tier: where it reads it
    if asked is not None:
        req = replace(req, service_tier=asked(body, request))
        nth = counters.tier_asked(req.service_tier)
        refused = tier_refusal(config.tiers, req.model, req.service_tier)
        if refused is not None:
            counters.status(400)
            return dialect.error(400, "invalid_request", refused)
        if capacity_refused(config.tiers.flex_refused, req.service_tier, nth):  # flex without room (tier_faults)
            status = getattr(dialect, "capacity_status", 429)
            counters.capacity_refusal()
            counters.status(status)
            return dialect.error(status, "capacity", CAPACITY_MESSAGE)
        if downgraded(config.tiers.priority_over, req.service_tier, nth):  # over the priority limit: standard
            req = replace(req, service_tier="standard")
        counters.tier_served(req.service_tier)
    prompt = server_prompt_tokens(req, body, fps_info)
    wait = limits.admit_tokens(prompt)  # the output is charged as it is generated (see sim.limits)
    if wait > 0:
        counters.status(429)
        return dialect.error(429, "rate_limit", "rate limit exceeded (tokens per minute)",
                             {**limits.retry_after(wait), **limits.headers()})

    cached_tokens = getattr(dialect, "cached_tokens", None)  # dialects without a prompt cache omit it
    cached = cached_tokens(state, body, [(w, h) for _, w, h in fps_info]) if cached_tokens else 0
    fault, served = await roll_fault(request, state, dialect)
    if served is not None:
        return served
    if fault == "refusal":
        return dialect.refusal(state, req)
    if req.service_tier == "flex" and config.tiers.flex_latency_s > 0:  # flex is slower (its whole point)
        await asyncio.sleep(config.tiers.flex_latency_s)

    reply = model_reply(state, dialect, req, body, fps_info, cached, empty=fault == "empty",
                        count_completion=count_completion, generated=limits.charge, prompt_tokens=prompt)
    reply.headers.update(limits.headers())
    return reply


def server_prompt_tokens(req: Any, body: Any, fps_info: list[tuple[str, int, int]]) -> int:
    """A request's prompt tokens as the server counts them: its text, and its images by the model's family and
    the resolution asked (machinery.image_cost)."""
    return server_estimate_tokens(req.all_text) + server_request_image_tokens(req.model, body,
                                                                              [(w, h) for _, w, h in fps_info])


def model_reply(state: SimState, dialect: Dialect, req: Any, body: Any, fps_info: list[tuple[str, int, int]],
                cached: int = 0, *, empty: bool = False, count_completion: bool = True,
                generated: Callable[[int], None] | None = None, prompt_tokens: int | None = None) -> web.Response:
    """The simulated model's answer to a parsed request, in the dialect's shape (live calls and batch
    lines alike), counted as a completion, or as a cut-off when it ran out of tokens while thinking.
    `prompt_tokens`: server_prompt_tokens when the caller counted them already (a live call, for its limits)."""
    fps = [fp for fp, _, _ in fps_info]
    schema, tool = asked_schema(body)  # --structured: the answer as JSON in the schema (answer_forms)
    reply = state.model.reply(req.text, fps, sampling_of(body), structured=schema is not None)
    if schema is not None and reply.source != "judge":
        reply = replace(reply, content=structured_content(schema, reply.answer or reply.content))
        req = replace(req, answer_tool=tool)
    if reply.source == "unknown" and state.config.answer_key is not None and len(state.config.answer_key):
        state.counters.unkeyed_request()  # asked what its key does not hold: answered at chance
    style = thinking_style(dialect.name, body) if state.config.think_tokens > 0 and not empty else None
    if prompt_tokens is None:
        prompt_tokens = server_prompt_tokens(req, body, fps_info)
    thought = None
    if style is None:
        content, finish = shape_reply(reply.content, reply.answer, req)
        if empty:
            content = ""
        usage = SimUsage(max(prompt_tokens, cached), server_estimate_tokens(content) + 1, cached)
    else:  # the output limit covers thinking and answer together: it cuts below, not on the answer alone
        content, finish = shape_reply(reply.content, reply.answer, replace(req, max_tokens=None))
        answer_tokens = server_estimate_tokens(content) + 1
        need = think_length(state.config.think_tokens, state.config.params.seed, req.text, fps)
        thought = think(style, need, req.max_tokens, answer_tokens)
        if thought.cut:
            content, finish, answer_tokens = "", "length", 0
        usage = SimUsage(max(prompt_tokens, cached), thought.tokens + answer_tokens, cached, thought.tokens)
    if generated is not None:  # the output counts against a token limit once it is generated
        generated(usage.output_tokens)
    if thought is not None and thought.cut:
        if count_completion:
            state.counters.cut_off(server_request_key(body))
    elif content and count_completion:
        state.counters.completed(server_request_key(body))
    return dialect.ok(state, req, content, finish, usage, thought=thought)



async def serve_quietly(request: web.Request, dialect: Dialect) -> web.StreamResponse:
    """A reply as the route would send it, not counted as a completion (for a route that spoils it)."""
    return await _serve(request, request.app[STATE], dialect, count_completion=False)
