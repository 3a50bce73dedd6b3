"""Wire formats ("dialects") the simulated server speaks, behind one small interface.

The server does everything that does not depend on the format once — rate limit, fault
dice, latency, the simulated model, counters — and asks the dialect only to read a request
body and to shape a success, an error or a refusal the way that provider's API does.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from evalkit.sim.anthropic_wire import AnthropicDialect
from evalkit.sim.gemini_wire import GeminiDialect
from evalkit.sim.prompt_cache import prompt_chunks
from evalkit.sim.wire import ParsedRequest, Usage, error_response, parse_body

if TYPE_CHECKING:
    from evalkit.sim.state import SimState
    from evalkit.sim.thinking import Thought


class Dialect(Protocol):
    name: str
    routes: tuple[str, ...]
    overloaded_status: int  # what "overloaded" looks like: 503 for OpenAI/Gemini, 529 for Anthropic

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        """The parts the simulator uses; raise BadRequest for a body the real API would reject."""
        ...

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: Usage,
           thought: Thought | None = None) -> web.Response:
        """A success; `thought`: the thinking to carry (content is "" when it was cut off)."""
        ...

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        """kind: bad_request, not_found, rate_limit, server, overloaded."""
        ...

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        """The provider's way of declining to answer (content filter / safety block)."""
        ...

    def cached_tokens(self, state: SimState, body: Any, image_sizes: list[tuple[int, int]]) -> int:
        """Prompt tokens served from the provider's prompt cache (0 where it has none)."""
        ...


_OPENAI_TYPES = {"bad_request": "BadRequestError", "not_found": "NotFoundError", "rate_limit": "RateLimitError",
                 "server": "InternalServerError", "overloaded": "InternalServerError"}


class OpenAIDialect:
    """OpenAI / vLLM chat completions."""

    name = "openai"
    routes = ("/v1/chat/completions",)
    overloaded_status = 503

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        return parse_body(body)

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: Usage,
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
        return web.json_response(reply)

    @staticmethod
    def _completion(state: SimState, req: ParsedRequest, content: str, finish: str, usage: Usage) -> dict[str, Any]:
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
        }

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        code = "rate_limit_exceeded" if kind == "rate_limit" else status
        return error_response(status, message, _OPENAI_TYPES.get(kind, "APIError"), code, headers)

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        return web.json_response(self._completion(state, req, "", "content_filter", Usage(0, 0)))

    def cached_tokens(self, state: SimState, body: Any, image_sizes: list[tuple[int, int]]) -> int:
        """Automatic prefix caching (evalkit.sim.prompt_cache states the rule)."""
        chunks = prompt_chunks(body.get("messages") or [], image_sizes)
        return state.prefix_cache.lookup_and_store(chunks, ready_in=state.latency_s)


DIALECTS: tuple[Dialect, ...] = (OpenAIDialect(), AnthropicDialect(), GeminiDialect(),)
