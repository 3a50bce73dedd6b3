"""Wire formats ("dialects") the simulated server speaks, behind one small interface.

The server does everything that does not depend on the format once — rate limit, fault
dice, latency, the simulated model, counters — and asks the dialect only to read a request
body and to shape a success, an error or a refusal the way that provider's API does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from evalkit.sim.anthropic_wire import AnthropicDialect
from evalkit.sim.azure_wire import AzureDialect
from evalkit.sim.bedrock_wire import BedrockClaudeDialect, ConverseDialect
from evalkit.sim.gemini_wire import GeminiDialect
from evalkit.sim.openai_wire import OpenAIDialect
from evalkit.sim.openrouter_wire import OpenRouterDialect
from evalkit.sim.vertex_wire import VertexClaudeDialect, VertexGeminiDialect
from evalkit.sim.wire import ParsedRequest, Usage

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


DIALECTS: tuple[Dialect, ...] = (OpenAIDialect(), AnthropicDialect(), GeminiDialect(), AzureDialect(),
                                 OpenRouterDialect(), VertexGeminiDialect(), VertexClaudeDialect(),
                                 ConverseDialect(), BedrockClaudeDialect())
__all__ = ["DIALECTS", "Dialect", "OpenAIDialect"]
