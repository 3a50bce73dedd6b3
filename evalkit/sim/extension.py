"""Routes added to a simulated server from outside the package (`routes=` of start_sim, SimThread, build_app).

The test suite adds its hostile replies this way (tests/hostile_routes.py): a twin of every model route
under a path prefix, wrapping the route's normal handler. The server's credential and provider checks
(Azure's, OpenRouter's) see a twin's path as the route beneath its prefix (`route_path`), so a twin is
checked as the route it wraps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web

from evalkit.sim.machinery.dialect import Dialect, Handler
from evalkit.sim.machinery.state import STATE

# a reply as the route would send it, counted as a request but not as a completion
QuietServe = Callable[[web.Request, Dialect], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class SimRoutes:
    """What a `routes` callable is given while the server's app is built."""

    app: web.Application
    model_routes: Mapping[str, tuple[Dialect, Handler]]  # each model route -> its dialect and normal handler
    serve_quietly: QuietServe

    def add_twins(self, prefix: str, wrap: Callable[[Dialect, Handler], Handler]) -> None:
        """Serve `prefix` + each model route with wrap(dialect, the route's normal handler). The prefix's
        placeholders are plain `{name}` (no pattern), so `route_path` can take the prefix off again."""
        self.app[STATE].twin_prefixes.append(prefix)
        for route, (dialect, normal) in self.model_routes.items():
            self.app.router.add_post(prefix + route, wrap(dialect, normal))

    def on_reset(self, reset: Callable[[], None]) -> None:
        """Call `reset` on `POST /sim/reset`, after the server's own counters and logs are cleared."""
        self.app[STATE].reset_hooks.append(reset)


def route_path(request: web.Request) -> str:
    """The path of the route a request reaches: a twin's path without its prefix, any other path as it is."""
    for prefix in request.app[STATE].twin_prefixes:
        try:
            head = prefix.format_map(request.match_info)
        except (KeyError, ValueError):  # the request matched no route of this prefix
            continue
        if request.path.startswith(head + "/"):
            return request.path[len(head):]
    return request.path
