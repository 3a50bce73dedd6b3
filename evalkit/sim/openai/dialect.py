"""The OpenAI / vLLM chat-completions dialect, the base of the services that speak its shape
(Azure OpenAI, OpenRouter): they differ only in extra reply fields, so `dress` is their hook."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from evalkit.sim.machinery.prompt_cache import prompt_chunks
from evalkit.sim.machinery.tiers import requested_tier, served_value
from evalkit.sim.machinery.wire import ParsedRequest, SimUsage, error_response, parse_body
from evalkit.sim.openai.only_responses import refuse_on_chat

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState
    from evalkit.sim.thinking import Thought

_OPENAI_TYPES = {"bad_request": "BadRequestError", "invalid_request": "invalid_request_error",
                 "not_found": "NotFoundError", "rate_limit": "RateLimitError", "capacity": "RateLimitError",
                 "server": "InternalServerError", "overloaded": "InternalServerError"}


class OpenAIDialect:
    """OpenAI / vLLM chat completions."""

    name = "openai"
    routes: tuple[str, ...] = ("/v1/chat/completions",)
    overloaded_status = 503

    def asked_tier(self, body: Any, request: web.Request) -> str | None:
        """The body's `service_tier`, echoed in the reply (sim.machinery.tiers)."""
        return requested_tier(body)

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        parsed = parse_body(body)
        refuse_on_chat(parsed.model)  # a Responses-only model (o3-pro): OpenAI's 404 naming v1/responses
        return parsed

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage,
           thought: Thought | None = None) -> web.Response:
        """OpenAI returns no thinking, only its count; vLLM's chat template writes it into the content as a
        `<think>` block, left open when the output limit ended it."""
        reply = self._completion(state, req, content, finish, usage)
        if thought is not None and thought.style == "vllm":
            closed = "" if thought.cut else f"\n</think>\n\n{content}"
            reply["choices"][0]["message"]["content"] = f"<think>\n{thought.text}{closed}"
        elif thought is not None:
            reply["usage"]["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens,
                                                           "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                                           "rejected_prediction_tokens": 0}
        return web.json_response(self.dress(state, req, reply, usage))

    def dress(self, state: SimState, req: ParsedRequest, reply: dict[str, Any], usage: SimUsage) -> dict[str, Any]:
        """The reply as this service sends it: the services built on this shape add their own fields."""
        return reply

    @staticmethod
    def _completion(state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage) -> dict[str, Any]:
        return {
            "id": state.next_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": state.config.snapshot or req.model,
            **({"system_fingerprint": state.config.system_fingerprint} if state.config.system_fingerprint else {}),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                      "total_tokens": usage.input_tokens + usage.output_tokens,
                      "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens}},
            # the tier served, where the request named one (a request without one gets replies as before)
            **({"service_tier": served_value(req.service_tier)} if req.service_tier is not None else {}),
        }

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        code = "rate_limit_exceeded" if kind == "rate_limit" else "resource_unavailable" if kind == "capacity" \
            else status
        return error_response(status, message, _OPENAI_TYPES.get(kind, "APIError"), code, headers)

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        usage = SimUsage(0, 0)
        return web.json_response(self.dress(state, req, self._completion(state, req, "", "content_filter", usage), usage))

    def cached_tokens(self, state: SimState, body: Any, image_sizes: list[tuple[int, int]]) -> int:
        """Automatic prefix caching (evalkit.sim.machinery.prompt_cache states the rule)."""
        chunks = prompt_chunks(body.get("messages") or [], image_sizes)
        return state.prefix_cache.lookup_and_store(chunks, ready_in=state.latency_s)
