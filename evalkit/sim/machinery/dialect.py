"""The interface every wire format ("dialect") of the simulated server implements, and a route's handler.

The server does everything that does not depend on the format once — rate limit, fault
dice, latency, the simulated model, counters — and asks the dialect only to read a request
body and to shape a success, an error or a refusal the way that provider's API does. The
dialects themselves are listed in evalkit/sim/dialects.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from evalkit.sim.machinery.wire import ParsedRequest, SimUsage

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState
    from evalkit.sim.thinking import Thought

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Dialect(Protocol):
    name: str
    routes: tuple[str, ...]
    overloaded_status: int  # what "overloaded" looks like: 503 for OpenAI/Gemini, 529 for Anthropic

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        """The parts the simulator uses; raise BadRequest for a body the real API would reject."""
        ...

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage,
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
