"""`evalkit sim`: an aiohttp server speaking the OpenAI / vLLM, Anthropic, Gemini, Azure and OpenRouter APIs.

The real SDKs and plain HTTP clients all work against it, so tests exercise the real client
code paths. The simulated model sees only the request body. Every API request is logged, without its
credentials, in SimServer.heard (evalkit.sim.machinery.heard). Code outside the package adds routes of its own
through `routes=` (evalkit.sim.extension): the test suite's hostile replies, for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

from evalkit.core.errors import EvalkitError
from evalkit.sim.azure.routes import add_azure_routes, azure_gate
from evalkit.sim.azure.routes import owns as azure_owns
from evalkit.sim.batch_routes import BATCHES, add_batch_routes
from evalkit.sim.bedrock.auth import bedrock_gate
from evalkit.sim.bedrock.auth import owns as bedrock_owns
from evalkit.sim.dialects import DIALECTS
from evalkit.sim.extension import Handler, SimRoutes
from evalkit.sim.machinery.batches import BatchStore
from evalkit.sim.machinery.counters import SimCounters
from evalkit.sim.machinery.dialect import Dialect
from evalkit.sim.machinery.gate import ReplyGate
from evalkit.sim.machinery.heard import Heard, heard_route, listen
from evalkit.sim.machinery.serving import dialect_handler, model_reply, serve_quietly
from evalkit.sim.machinery.state import STATE, SimConfig, SimState
from evalkit.sim.machinery.tiers import SimTiers as SimTiers  # a SimConfig's `tiers` (public: evalkit.sim)
from evalkit.sim.openai.edits import handle_image_edit
from evalkit.sim.openai.metadata import add_metadata_routes
from evalkit.sim.openrouter.routes import add_openrouter_routes, openrouter_gate
from evalkit.sim.openrouter.routes import owns as openrouter_owns
from evalkit.sim.vertex.routes import TOKEN_ROUTE, add_vertex_routes, vertex_gate
from evalkit.sim.vertex.routes import owns as vertex_owns


async def handle_counters(request: web.Request) -> web.Response:
    return web.json_response({**request.app[STATE].counters.snapshot(), "batch": request.app[BATCHES].counts})


async def handle_reset(request: web.Request) -> web.Response:
    state = request.app[STATE]
    state.counters.reset()
    state.heard.reset()
    for reset in state.reset_hooks:
        reset()
    return web.json_response({"ok": True})


def key_check(key: str) -> Any:
    """Middleware: 401 for an API request without `key` (as a bearer token, api-key, x-api-key or
    x-goog-api-key), as `vllm serve --api-key` does; the simulator's own /sim and /health routes stay
    open, and Azure's and OpenRouter's routes check their own way (evalkit.sim.azure.routes, .openrouter_routes)."""

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        if (request.path.startswith(("/sim/", "/health")) or azure_owns(request) or openrouter_owns(request)
                or vertex_owns(request)):
            return await handler(request)
        if bedrock_owns(request):  # checked as AWS checks them (evalkit.sim.bedrock.auth)
            return await handler(request)
        given = {request.headers.get("Authorization", ""), request.headers.get("api-key", ""),
                 request.headers.get("x-api-key", ""), request.headers.get("x-goog-api-key", "")}
        if f"Bearer {key}" not in given and key not in given:
            return web.json_response({"error": {"message": "Unauthorized", "type": "authentication_error",
                                                "code": 401}}, status=401)
        return await handler(request)

    return check


Routes = Callable[[SimRoutes], None]


def build_app(config: SimConfig, routes: Routes | None = None) -> web.Application:
    """The aiohttp application; call inside a running loop (its state owns an asyncio.Event). `routes`
    adds routes of its own (evalkit.sim.extension)."""
    state = SimState(config)
    middlewares = [listen(state.heard), *([key_check(config.api_key)] if config.api_key else []),
                   azure_gate(config), openrouter_gate, vertex_gate(config)]
    middlewares.append(bedrock_gate(config.aws_keys, config.aws_region, config.api_key))
    app = web.Application(client_max_size=256 * 1024 * 1024, middlewares=middlewares)
    app[STATE] = state
    model_routes: dict[str, tuple[Dialect, Handler]] = {}
    for dialect in DIALECTS:
        for route in dialect.routes:
            model_routes[route] = (dialect, dialect_handler(dialect))
            app.router.add_post(route, model_routes[route][1])
    app.router.add_post("/v1/images/edits", handle_image_edit)
    add_metadata_routes(app)
    add_azure_routes(app)
    add_openrouter_routes(app)
    add_vertex_routes(app)
    add_batch_routes(app, model_reply)
    app.router.add_get("/sim/counters", handle_counters)
    app.router.add_post("/sim/reset", handle_reset)
    app.router.add_get("/sim/heard", heard_route(state.heard))
    if routes is not None:
        routes(SimRoutes(app, model_routes, serve_quietly))
    return app


class SimServer:
    """A running simulated server on the current event loop."""

    def __init__(self, runner: web.AppRunner, state: SimState, url: str) -> None:
        self._runner = runner
        self._state = state
        self.url = url
        self.config = state.config

    @property
    def counters(self) -> SimCounters:
        return self._state.counters

    @property
    def batches(self) -> BatchStore:
        """The batches submitted to the three batch APIs, and their behaviour (delay, failures, expiry)."""
        return self._runner.app[BATCHES]

    @property
    def gate(self) -> ReplyGate:
        """The gate every reply passes (evalkit.sim.machinery.gate): tests hold replies to keep a run open."""
        return self._state.gate

    @property
    def heard(self) -> tuple[Heard, ...]:
        """The API requests heard since the start or the last /sim/reset, oldest first (evalkit.sim.machinery.heard)."""
        return self._state.heard.snapshot()

    @property
    def credits(self) -> float | None:
        """OpenRouter credits (USD) left, None when unlimited; setting it is a top-up (as POST /sim/credits)."""
        return self._state.credits.remaining

    @credits.setter
    def credits(self, remaining: float | None) -> None:
        self._state.credits.set(remaining)

    async def close(self) -> None:
        """Stop serving; hanging requests are released at once instead of after hang_s."""
        self._state.shutdown()
        await self._runner.cleanup()

    async def __aenter__(self) -> SimServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def start_sim(config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0,
                    routes: Routes | None = None) -> SimServer:
    """Start a simulated server on the running loop; port 0 picks a free port (see .url); `routes` adds
    routes of its own (evalkit.sim.extension)."""
    app = build_app(config or SimConfig(), routes)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    server = SimServer(runner, app[STATE], f"http://{bound[0]}:{bound[1]}")
    key_file = server.config.google_key_file
    if key_file is not None:  # its token_uri names the port, known only now
        try:
            key_file.write(server.url + TOKEN_ROUTE)
        except ValueError as e:
            await server.close()
            raise EvalkitError(str(e)) from None
    return server


class SimThread:
    """A simulated server on its own event loop in a background thread, for synchronous callers."""

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0,
                 routes: Routes | None = None) -> None:
        self.config = config or SimConfig()
        self.host, self.port, self.routes = host, port, routes
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: SimServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SimThread:
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(start_sim(self.config, self.host, self.port, self.routes))
            except BaseException as exc:  # surfaced to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            self.url = self._server.url
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._server.close())
            loop.close()

        self._thread = threading.Thread(target=run, name="evalkit-sim", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    @property
    def counters(self) -> SimCounters:
        """The live counters; use .snapshot() or counters[name], both safe from this thread."""
        if self._server is None:
            raise RuntimeError("SimThread is not running")
        return self._server.counters

    @property
    def batches(self) -> BatchStore:
        """The batches submitted to the three batch APIs, and their behaviour (delay, failures, expiry)."""
        if self._server is None:
            raise RuntimeError("SimThread is not running")
        return self._server.batches

    @property
    def heard(self) -> tuple[Heard, ...]:
        """The API requests heard (SimServer.heard), safe from this thread."""
        if self._server is None:
            raise RuntimeError("SimThread is not running")
        return self._server.heard

    @property
    def credits(self) -> float | None:
        """OpenRouter credits left (SimServer.credits); setting them is a top-up, safe from this thread."""
        if self._server is None:
            raise RuntimeError("SimThread is not running")
        return self._server.credits

    @credits.setter
    def credits(self, remaining: float | None) -> None:
        if self._server is None:
            raise RuntimeError("SimThread is not running")
        self._server.credits = remaining

    def hold(self, after: int = 0) -> None:
        """Let `after` more replies through, then hold the rest until release() (evalkit.sim.machinery.gate);
        in force when this returns."""
        self._on_loop(lambda server: server.gate.hold(after))

    def release(self) -> None:
        """Let every held and later reply go; in force when this returns."""
        self._on_loop(lambda server: server.gate.release())

    @property
    def held(self) -> int:
        """How many requests are waiting at the gate now."""
        return self._on_loop(lambda server: server.gate.held)

    def _on_loop(self, fn: Callable[[SimServer], Any]) -> Any:
        """fn(server) run on the server's loop, its result returned here (the gate lives on that loop)."""
        if self._server is None or self._loop is None:
            raise RuntimeError("SimThread is not running")
        server = self._server

        async def call() -> Any:
            return fn(server)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()

    def close(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._thread = None

    def __enter__(self) -> SimThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_forever(config: SimConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run until Ctrl-C, for `evalkit sim`. A port in use, or a host that cannot be bound, is EvalkitError
    (one line, exit 2), as for `evalkit view --serve`."""
    if not 0 <= port <= 65535:
        raise EvalkitError(f"--port must be 0..65535, got {port}")

    async def main() -> None:
        try:
            server = await start_sim(config, host, port)
        except OSError as e:
            cause = ("the port is in use (another server listens there: stop it, or choose another --port)"
                     if e.errno == errno.EADDRINUSE else e.strerror or str(e))
            raise EvalkitError(f"cannot serve on {host}:{port}: {cause}") from None
        print(f"evalkit sim listening on {server.url}", flush=True)
        if config.google_key_file is not None:
            print(f"Vertex AI: a test service account's key file, signed in by this server's {TOKEN_ROUTE}: "
                  f"GOOGLE_APPLICATION_CREDENTIALS={config.google_key_file.path}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
