"""`evalkit sim`: an aiohttp server speaking the OpenAI / vLLM, Anthropic, Gemini, Azure and OpenRouter APIs.

The real SDKs and plain HTTP clients all work against it, so tests exercise the real client
code paths. The simulated model sees only the request body. Every API request is logged, without its
credentials, in SimServer.heard (evalkit.sim.heard). Code outside the package adds routes of its own
through `routes=` (evalkit.sim.extension): the test suite's hostile replies, for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiohttp import web

from evalkit.core.errors import EvalkitError
from evalkit.sim.azure_routes import add_azure_routes, azure_gate
from evalkit.sim.azure_routes import owns as azure_owns
from evalkit.sim.batch_routes import BATCHES, add_batch_routes
from evalkit.sim.batches import BatchStore
from evalkit.sim.bedrock_auth import bedrock_gate
from evalkit.sim.bedrock_auth import owns as bedrock_owns
from evalkit.sim.counters import SimCounters, request_key
from evalkit.sim.dialects import DIALECTS, Dialect
from evalkit.sim.edits import handle_image_edit
from evalkit.sim.extension import Handler, SimRoutes
from evalkit.sim.gate import ReplyGate
from evalkit.sim.heard import Heard, heard_route, listen
from evalkit.sim.inject import apply_fault
from evalkit.sim.metadata_routes import add_metadata_routes
from evalkit.sim.model import estimate_tokens, image_tokens, sampling_of
from evalkit.sim.openrouter_routes import add_openrouter_routes, openrouter_gate
from evalkit.sim.openrouter_routes import owns as openrouter_owns
from evalkit.sim.state import STATE, SimConfig, SimState
from evalkit.sim.thinking import think, think_length, thinking_style
from evalkit.sim.vertex_routes import add_vertex_routes, vertex_gate
from evalkit.sim.vertex_routes import owns as vertex_owns
from evalkit.sim.wire import MALFORMED_BODY, BadRequest, Usage, shape_reply


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
    except BadRequest as exc:
        counters.status(400)
        return dialect.error(400, "bad_request", str(exc))
    if config.strict_model and req.model != config.served_model_name:
        counters.status(404)
        return dialect.error(404, "not_found", f"The model `{req.model}` does not exist.")
    prompt = estimate_tokens(req.all_text) + sum(image_tokens(w, h) for _, w, h in fps_info)
    wait = limits.admit_tokens(prompt)  # the output is charged as it is generated (see sim.limits)
    if wait > 0:
        counters.status(429)
        return dialect.error(429, "rate_limit", "rate limit exceeded (tokens per minute)",
                             {**limits.retry_after(wait), **limits.headers()})

    cached_tokens = getattr(dialect, "cached_tokens", None)  # dialects without a prompt cache omit it
    cached = cached_tokens(state, body, [(w, h) for _, w, h in fps_info]) if cached_tokens else 0
    fault = state.dice.draw()
    injected = await apply_fault(request, state, dialect, fault)
    if injected is not None:
        return injected
    if fault == "malformed":
        return web.Response(status=200, text=MALFORMED_BODY, content_type="application/json")
    if fault == "refusal":
        return dialect.refusal(state, req)

    reply = model_reply(state, dialect, req, body, fps_info, cached, empty=fault == "empty",
                        count_completion=count_completion, generated=limits.charge)
    reply.headers.update(limits.headers())
    return reply


def model_reply(state: SimState, dialect: Dialect, req: Any, body: Any, fps_info: list[tuple[str, int, int]],
                cached: int = 0, *, empty: bool = False, count_completion: bool = True,
                generated: Callable[[int], None] | None = None) -> web.Response:
    """The simulated model's answer to a parsed request, in the dialect's shape (live calls and batch
    lines alike), counted as a completion, or as a cut-off when it ran out of tokens while thinking."""
    fps = [fp for fp, _, _ in fps_info]
    reply = state.model.reply(req.text, fps, sampling_of(body))
    if reply.source == "unknown" and state.config.answer_key is not None and len(state.config.answer_key):
        state.counters.unkeyed_request()  # asked what its key does not hold: answered at chance
    style = thinking_style(dialect.name, body) if state.config.think_tokens > 0 and not empty else None
    prompt_tokens = estimate_tokens(req.all_text) + sum(image_tokens(w, h) for _, w, h in fps_info)
    thought = None
    if style is None:
        content, finish = shape_reply(reply.content, reply.answer, req)
        if empty:
            content = ""
        usage = Usage(max(prompt_tokens, cached), estimate_tokens(content) + 1, cached)
    else:  # the output limit covers thinking and answer together: it cuts below, not on the answer alone
        content, finish = shape_reply(reply.content, reply.answer, replace(req, max_tokens=None))
        answer_tokens = estimate_tokens(content) + 1
        need = think_length(state.config.think_tokens, state.config.params.seed, req.text, fps)
        thought = think(style, need, req.max_tokens, answer_tokens)
        if thought.cut:
            content, finish, answer_tokens = "", "length", 0
        usage = Usage(max(prompt_tokens, cached), thought.tokens + answer_tokens, cached, thought.tokens)
    if generated is not None:  # the output counts against a token limit once it is generated
        generated(usage.output_tokens)
    if thought is not None and thought.cut:
        if count_completion:
            state.counters.cut_off(request_key(body))
    elif content and count_completion:
        state.counters.completed(request_key(body))
    return dialect.ok(state, req, content, finish, usage, thought=thought)


async def handle_counters(request: web.Request) -> web.Response:
    return web.json_response({**request.app[STATE].counters.snapshot(), "batch": request.app[BATCHES].counts})


async def serve_quietly(request: web.Request, dialect: Dialect) -> web.StreamResponse:
    """A reply as the route would send it, not counted as a completion (for a route that spoils it)."""
    return await _serve(request, request.app[STATE], dialect, count_completion=False)


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
    open, and Azure's and OpenRouter's routes check their own way (evalkit.sim.azure_routes, .openrouter_routes)."""

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        if (request.path.startswith(("/sim/", "/health")) or azure_owns(request) or openrouter_owns(request)
                or vertex_owns(request)):
            return await handler(request)
        if bedrock_owns(request):  # checked as AWS checks them (evalkit.sim.bedrock_auth)
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
        """The gate every reply passes (evalkit.sim.gate): tests hold replies to keep a run open."""
        return self._state.gate

    @property
    def heard(self) -> tuple[Heard, ...]:
        """The API requests heard since the start or the last /sim/reset, oldest first (evalkit.sim.heard)."""
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
    return SimServer(runner, app[STATE], f"http://{bound[0]}:{bound[1]}")


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
        """Let `after` more replies through, then hold the rest until release() (evalkit.sim.gate);
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
        try:
            await asyncio.Event().wait()
        finally:
            await server.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
