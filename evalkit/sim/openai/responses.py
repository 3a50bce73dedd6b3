"""OpenAI's Responses API on the simulated server (issue 47): `POST /v1/responses`, and Azure OpenAI's v1
`/openai/v1/responses` (the deployment as `model`, its credential checked by evalkit.sim.azure.routes).

What it reads: `input` (a string, or messages whose content is a string or `input_text` / `input_image` /
`output_text` parts), `instructions`, `max_output_tokens`, `reasoning.effort` (thinking, as chat's
`reasoning_effort`) and `reasoning.summary` (the thinking's summary in the reasoning item), `service_tier`.
What it answers: a `response` object with reasoning and message items, `status: incomplete` with
`incomplete_details.reason` `max_output_tokens` when the output limit cut the answer (or the thinking) and
`content_filter` for a refusal, usage with `input_tokens_details.cached_tokens` and
`output_tokens_details.reasoning_tokens`. Parameters the API does not take (`seed`, `stop`, `messages`,
`max_tokens`) are a 400, as OpenAI answers them, so a client cannot send chat's fields by mistake.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from evalkit.sim.machinery.prompt_cache import prompt_chunks
from evalkit.sim.machinery.tiers import served_value
from evalkit.sim.machinery.wire import BadRequest, ParsedRequest, SimUsage
from evalkit.sim.openai.dialect import OpenAIDialect

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState
    from evalkit.sim.thinking import Thought

RESPONSES_ROUTE = "/v1/responses"
AZURE_RESPONSES_ROUTE = "/openai/v1/responses"
_NOT_TAKEN = ("seed", "stop", "messages", "max_tokens", "max_completion_tokens", "reasoning_effort")


@dataclass(frozen=True)
class ResponsesRequest(ParsedRequest):
    """A parsed Responses body, with what its reply echoes (instructions, reasoning, store, sampling)."""

    echo: dict[str, Any] = field(default_factory=dict)


def _parts(item: Any, i: int) -> tuple[list[str], list[str]]:
    """(texts, image URLs) of one input item."""
    if not isinstance(item, dict):
        raise BadRequest(f"input[{i}] must be an object")
    content = item.get("content")
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise BadRequest(f"input[{i}].content must be a string or a list of parts")
    texts: list[str] = []
    images: list[str] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            images.append(part["image_url"])
        else:
            raise BadRequest(f"Invalid value for input[{i}].content[{j}]: unsupported part type {kind!r}")
    return texts, images


def as_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's input as chat messages (what the simulator's prompt cache and counters read)."""
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    out: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        out.append({"role": "system", "content": body["instructions"]})
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, list):
            content = [{"type": "image_url", "image_url": {"url": p.get("image_url"), "detail": p.get("detail")}}
                       if isinstance(p, dict) and p.get("type") == "input_image"
                       else {"type": "text", "text": p.get("text") if isinstance(p, dict) else None}
                       for p in content]
        out.append({"role": item.get("role") if isinstance(item, dict) else None, "content": content})
    return out


def parse_responses(body: Any) -> ParsedRequest:
    """Validate a Responses body (unknown fields other than chat's are accepted)."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("Missing required parameter: 'model'.")
    for name in _NOT_TAKEN:
        if name in body:
            raise BadRequest(f"Unsupported parameter: '{name}'.")
    if body.get("stream") or body.get("background"):
        raise BadRequest("streaming and background mode are not supported by evalkit sim")
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise BadRequest("Missing required parameter: 'input'.")
    user_text, all_texts, image_urls = "", [], []
    if isinstance(body.get("instructions"), str):
        all_texts.append(body["instructions"])
    for i, item in enumerate(items):
        texts, images = _parts(item, i)
        all_texts += texts
        image_urls += images
        if item.get("role", "user") == "user":
            user_text = "\n".join(texts)
    limit = body.get("max_output_tokens")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 16):
        raise BadRequest("Invalid 'max_output_tokens': integer below minimum value (16).")
    echo = {k: body.get(k) for k in ("instructions", "reasoning", "store", "temperature", "top_p")}
    return ResponsesRequest(model, user_text, "\n".join(all_texts), image_urls, limit, [], None, echo=echo)


class ResponsesDialect(OpenAIDialect):
    """OpenAI's Responses API (`thinking_style` reads its `reasoning.effort`)."""

    name = "openai-responses"
    routes: tuple[str, ...] = (RESPONSES_ROUTE,)

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        return parse_responses(body)

    def _response(self, state: SimState, req: ParsedRequest, output: list[dict[str, Any]],
                  usage: SimUsage, incomplete: str | None) -> dict[str, Any]:
        body = req.echo if isinstance(req, ResponsesRequest) else {}
        reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
        return {
            "id": "resp_" + state.next_id().removeprefix("chatcmpl-"), "object": "response",
            "created_at": int(time.time()), "status": "incomplete" if incomplete else "completed",
            "background": False, "error": None,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": body.get("instructions"), "max_output_tokens": req.max_tokens,
            "model": state.config.snapshot or req.model, "output": output, "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": reasoning.get("effort"),
                                                        "summary": reasoning.get("summary")},
            "store": body.get("store") is not False, "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": body.get("top_p", 1.0),
            "truncation": "disabled", "metadata": {},
            "usage": {"input_tokens": usage.input_tokens,
                      "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
                      "output_tokens": usage.output_tokens,
                      "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
                      "total_tokens": usage.input_tokens + usage.output_tokens},
            "service_tier": served_value(req.service_tier) if req.service_tier is not None else "default",
        }

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage,
           thought: Thought | None = None) -> web.Response:
        """The response object: a reasoning item when the model thought (its summary when asked), then the
        message unless the limit ran out while thinking."""
        output: list[dict[str, Any]] = []
        serial = state.next_id().removeprefix("chatcmpl-")
        if thought is not None:
            reasoning = req.echo.get("reasoning") if isinstance(req, ResponsesRequest) else None
            summary = reasoning.get("summary") if isinstance(reasoning, dict) else None
            output.append({"id": f"rs_{serial}", "type": "reasoning",
                           "summary": [{"type": "summary_text", "text": thought.text}] if summary else []})
        if thought is None or not thought.cut:
            output.append({"id": f"msg_{serial}", "type": "message", "status": "completed" if finish != "length"
                           else "incomplete", "role": "assistant",
                           "content": [{"type": "output_text", "text": content, "annotations": []}]})
        incomplete = "max_output_tokens" if finish == "length" else None
        return web.json_response(self._response(state, req, output, usage, incomplete))

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        """The content filter: an incomplete response with no output, as chat's `content_filter` finish."""
        return web.json_response(self._response(state, req, [], SimUsage(0, 0), "content_filter"))

    def cached_tokens(self, state: SimState, body: Any, image_sizes: list[tuple[int, int]]) -> int:
        chunks = prompt_chunks(as_messages(body), image_sizes)
        return state.prefix_cache.lookup_and_store(chunks, ready_in=state.latency_s)


class AzureResponsesDialect(ResponsesDialect):
    """Azure OpenAI's v1 Responses API: OpenAI's shape, the deployment as `model`."""

    name = "azure-responses"
    routes = (AZURE_RESPONSES_ROUTE,)
