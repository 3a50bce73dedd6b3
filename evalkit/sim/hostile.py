"""Hostile replies, selected by URL path, for every wire format the simulated server speaks.

A base URL `http://HOST:PORT/hostile/<behaviour>` followed by a provider's usual path
(`/v1/chat/completions`, `/v1/messages`, `/v1beta/models/M:generateContent`) reaches the normal
route, which misbehaves as named; `/hostile/<behaviour>:<k>` misbehaves on every k-th request of
that selector only, so one run gets good and bad replies (a retry usually lands on a good one).
Clients need no test double: the real SDKs and the aiohttp client meet the defects on the wire.

Behaviours (how the reply shapes differ per dialect: evalkit.sim.hostile_bodies):

- content-number, content-list (non-text parts), content-object: the answer text is not a string;
- usage-string, usage-negative: the token counts are not non-negative integers;
- choices-empty, no-candidates: the reply holds no answer at all (and no block reason);
- not-json, json-array (a top-level array), invalid-utf8 (a 200 body that is not UTF-8);
- huge (40 MB of valid JSON, its Content-Length declared), huge-chunked (the same, chunked: the
  size shows only while reading), gzip-bomb (`Content-Encoding: gzip`, inflating to 400 MB);
- gzip-members: no defect, a sound reply sent as two gzip members, which a client must read;
- redirect-301, redirect-302, redirect-307: to the same path under `/sink/` on another origin
  (`localhost` when the request came to `127.0.0.1`, else `127.0.0.1`). The sink records every
  header it receives (`GET /sim/sink`) and answers a well-formed "A", so a client that follows
  shows both the leak and the answer it should not have recorded;
- echo-key: a 400 whose message repeats the request's Authorization / api-key / x-api-key /
  x-goog-api-key value, raw, percent-encoded and base64-encoded.

A spoiled reply is counted as a request but never as a completion.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from evalkit.sim.dialects import DIALECTS, Dialect
from evalkit.sim.hostile_bodies import (
    RESHAPE,
    gzip_bomb,
    gzip_members,
    huge,
    invalid_utf8,
    json_array,
    not_json,
    reshaped,
)
from evalkit.sim.state import STATE, SimState
from evalkit.sim.wire import ParsedRequest, Usage

HOSTILE_PREFIX = "/hostile/{selector}"
SINK_ROUTE = "/sink/{tail:.*}"
REDIRECTS = {"redirect-301": 301, "redirect-302": 302, "redirect-307": 307}
BEHAVIOURS = (*RESHAPE, "not-json", "json-array", "invalid-utf8", "huge", "huge-chunked", "gzip-bomb",
              "gzip-members", *REDIRECTS, "echo-key")
KEY_HEADERS = ("Authorization", "api-key", "x-api-key", "x-goog-api-key")
SINK_ANSWER = "A"
_SINK_SUFFIX = {"openai": "/chat/completions", "anthropic": "/messages", "gemini": ":generateContent"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# serves a request as the normal route would, without counting it as a request or a completion
QuietServe = Callable[[web.Request, SimState, Dialect], Awaitable[web.StreamResponse]]


def unhostile(path: str) -> str:
    """The route a path reaches: `/hostile/<selector>/v1/...` -> `/v1/...` (other paths unchanged)."""
    if not path.startswith("/hostile/"):
        return path
    _, _, rest = path[len("/hostile/"):].partition("/")
    return "/" + rest


def parse_selector(selector: str) -> tuple[str, int]:
    """`content-number` -> ("content-number", 1); `content-number:3` -> ("content-number", 3)."""
    name, sep, every = selector.partition(":")
    if name not in BEHAVIOURS:
        raise ValueError(f"unknown hostile behaviour {name!r} (known: {', '.join(BEHAVIOURS)})")
    if not sep:
        return name, 1
    if not every.isdigit() or int(every) < 1:
        raise ValueError(f"hostile selector {selector!r}: expected BEHAVIOUR:K with K a positive integer")
    return name, int(every)


def hostile_handler(dialect: Dialect, normal: Handler, serve_quietly: QuietServe) -> Handler:
    """The route `/hostile/<selector>` + one of `dialect`'s routes."""

    async def handle(request: web.Request) -> web.StreamResponse:
        state = request.app[STATE]
        selector = request.match_info["selector"]
        try:
            behaviour, every = parse_selector(selector)
        except ValueError as exc:
            return dialect.error(404, "not_found", str(exc))
        if not state.hostile.next_is_bad(selector, every):
            return await normal(request)
        state.counters.start()
        try:
            return await _misbehave(request, state, dialect, behaviour, serve_quietly)
        finally:
            state.counters.finish()

    return handle


async def _misbehave(request: web.Request, state: SimState, dialect: Dialect, behaviour: str,
                     serve_quietly: QuietServe) -> web.StreamResponse:
    if behaviour in REDIRECTS:
        await request.read()
        return web.Response(status=REDIRECTS[behaviour], headers={"Location": _sink_url(request)})
    if behaviour == "echo-key":
        await request.read()
        return dialect.error(400, "bad_request", f"API key not valid: {_echo_keys(request)}")
    served = await serve_quietly(request, state, dialect)
    if served.status != 200 or not isinstance(served, web.Response) or served.body is None:
        return served  # an injected fault or a bad request: the defect needs a good reply to spoil
    try:
        reply = json.loads(served.body)
    except ValueError:  # the server's own "malformed" fault: already broken
        return served
    if behaviour in RESHAPE:
        return reshaped(behaviour, dialect.name, reply)
    if behaviour == "not-json":
        return not_json()
    if behaviour == "json-array":
        return json_array(reply)
    if behaviour == "invalid-utf8":
        return invalid_utf8(dialect.name, reply)
    if behaviour in ("huge", "huge-chunked"):
        return await huge(request, reply, declared=behaviour == "huge")
    if behaviour == "gzip-members":
        return gzip_members(reply)
    return gzip_bomb(reply)


def _sink_url(request: web.Request) -> str:
    """The request's own path under /sink/, on the other name of this server (another origin)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    port = sockname[1] if sockname else request.url.port
    host = "localhost" if request.url.host == "127.0.0.1" else "127.0.0.1"
    tail = request.path_qs.removeprefix(f"/hostile/{request.match_info['selector']}")
    return f"http://{host}:{port}/sink{tail}"


def _echo_keys(request: web.Request) -> str:
    """Every credential header's value as a careless server might repeat it back."""
    echoed = []
    for name in KEY_HEADERS:
        value = request.headers.get(name)
        if value:
            bare = value.removeprefix("Bearer ")
            encoded = base64.b64encode(bare.encode()).decode()
            echoed.append(f"{name}={value} (url {quote(bare, safe='')}, b64 {encoded})")
    return "; ".join(echoed) or "no key sent"


async def handle_sink(request: web.Request) -> web.Response:
    """Where redirects lead: record what arrived, answer as the matching dialect would."""
    state = request.app[STATE]
    body = await request.read()
    state.hostile.received(request.method, request.path_qs, list(request.headers.items()), len(body))
    dialect = next((d for d in DIALECTS if request.path.endswith(_SINK_SUFFIX.get(d.name, "\0"))), DIALECTS[0])
    req = ParsedRequest(model="sink-model", text="", all_text="", image_urls=[], max_tokens=None, stop=[],
                        guided_choice=None)
    return dialect.ok(state, req, SINK_ANSWER, "stop", Usage(1, 1))


async def handle_hostile_log(request: web.Request) -> web.Response:
    """GET /sim/sink: the selectors' counts and every request the sink received, headers included."""
    return web.json_response(request.app[STATE].hostile.snapshot())


def add_hostile_routes(app: web.Application, handlers: dict[str, Handler], serve_quietly: QuietServe) -> None:
    """The hostile twin of every dialect route (`handlers`: route -> its normal handler), the sink
    and its log."""
    for dialect in DIALECTS:
        for route in dialect.routes:
            app.router.add_post(HOSTILE_PREFIX + route, hostile_handler(dialect, handlers[route], serve_quietly))
    app.router.add_route("*", SINK_ROUTE, handle_sink)
    app.router.add_get("/sim/sink", handle_hostile_log)
