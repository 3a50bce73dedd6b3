"""Hostile replies, selected by URL path, for every wire format the simulated server speaks.

Test code, added to a simulator through its extension point (evalkit.sim.extension):

    hostile = HostileRoutes()
    with SimThread(SimConfig(...), routes=hostile) as sim: ...   # or start_sim(..., routes=hostile)
    hostile.log.snapshot()   # what was spoiled, what the sink received

A base URL `http://HOST:PORT/hostile/<behaviour>` followed by a provider's usual path
(`/v1/chat/completions`, `/v1/messages`, `/v1beta/models/M:generateContent`) reaches the normal
route, which misbehaves as named; `/hostile/<behaviour>:<k>` misbehaves on every k-th request of
that selector only, so one run gets good and bad replies (a retry usually lands on a good one).
Clients need no test double: the real SDKs and the aiohttp client meet the defects on the wire.

Behaviours (how the reply shapes differ per dialect: tests/hostile_bodies.py):

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

A spoiled reply is counted as a request but never as a completion. `POST /sim/reset` clears the log.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from aiohttp import web
from hostile_bodies import (
    RESHAPE,
    gzip_bomb,
    gzip_members,
    huge,
    invalid_utf8,
    json_array,
    not_json,
    reshaped,
)

from evalkit.sim.dialects import DIALECTS
from evalkit.sim.extension import Handler, QuietServe, SimRoutes
from evalkit.sim.machinery.dialect import Dialect
from evalkit.sim.machinery.state import STATE
from evalkit.sim.machinery.wire import ParsedRequest, SimUsage

HOSTILE_PREFIX = "/hostile/{selector}"
SINK_ROUTE = "/sink/{tail:.*}"
REDIRECTS = {"redirect-301": 301, "redirect-302": 302, "redirect-307": 307}
BEHAVIOURS = (*RESHAPE, "not-json", "json-array", "invalid-utf8", "huge", "huge-chunked", "gzip-bomb",
              "gzip-members", *REDIRECTS, "echo-key")
KEY_HEADERS = ("Authorization", "api-key", "x-api-key", "x-goog-api-key")
SINK_ANSWER = "A"
_SINK_SUFFIX = {"openai": "/chat/completions", "anthropic": "/messages", "gemini": ":generateContent"}



@dataclass
class HostileLog:
    """Per selector (`content-number:3`): requests seen and replies spoiled; the sink's requests, every
    header kept, values included (a test proves that no credential followed a redirect by finding none)."""

    seen: dict[str, int] = field(default_factory=dict)
    spoiled: dict[str, int] = field(default_factory=dict)
    sink: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def next_is_bad(self, selector: str, every: int) -> bool:
        """Count a request on `selector`; True for every `every`-th one (each one when every is 1)."""
        with self._lock:
            n = self.seen[selector] = self.seen.get(selector, 0) + 1
            bad = n % every == 0
            if bad:
                self.spoiled[selector] = self.spoiled.get(selector, 0) + 1
            return bad

    def received(self, method: str, path: str, headers: list[tuple[str, str]], body_bytes: int) -> None:
        with self._lock:
            self.sink.append({"method": method, "path": path, "headers": headers, "body_bytes": body_bytes})

    def reset(self) -> None:
        with self._lock:
            self.seen, self.spoiled, self.sink = {}, {}, []

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"seen": dict(self.seen), "spoiled": dict(self.spoiled),
                    "sink": [dict(r, headers=list(r["headers"])) for r in self.sink]}


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


def hostile_handler(dialect: Dialect, normal: Handler, serve_quietly: QuietServe, log: HostileLog) -> Handler:
    """The route `/hostile/<selector>` + one of `dialect`'s routes."""

    async def handle(request: web.Request) -> web.StreamResponse:
        counters = request.app[STATE].counters
        selector = request.match_info["selector"]
        try:
            behaviour, every = parse_selector(selector)
        except ValueError as exc:
            return dialect.error(404, "not_found", str(exc))
        if not log.next_is_bad(selector, every):
            return await normal(request)
        counters.start()
        try:
            return await _misbehave(request, dialect, behaviour, serve_quietly)
        finally:
            counters.finish()

    return handle


async def _misbehave(request: web.Request, dialect: Dialect, behaviour: str,
                     serve_quietly: QuietServe) -> web.StreamResponse:
    if behaviour in REDIRECTS:
        await request.read()
        return web.Response(status=REDIRECTS[behaviour], headers={"Location": _sink_url(request)})
    if behaviour == "echo-key":
        await request.read()
        return dialect.error(400, "bad_request", f"API key not valid: {_echo_keys(request)}")
    served = await serve_quietly(request, dialect)
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


class HostileRoutes:
    """`routes=` for a simulated server: the hostile twin of every model route, the sink and its log
    (`GET /sim/sink`). One log per instance: give each server its own."""

    def __init__(self) -> None:
        self.log = HostileLog()

    def __call__(self, routes: SimRoutes) -> None:
        routes.add_twins(HOSTILE_PREFIX, lambda dialect, normal: hostile_handler(dialect, normal,
                                                                                 routes.serve_quietly, self.log))
        routes.app.router.add_route("*", SINK_ROUTE, self._sink)
        routes.app.router.add_get("/sim/sink", self._show_log)
        routes.on_reset(self.log.reset)

    async def _sink(self, request: web.Request) -> web.Response:
        """Where redirects lead: record what arrived, answer as the matching dialect would."""
        body = await request.read()
        self.log.received(request.method, request.path_qs, list(request.headers.items()), len(body))
        dialect = next((d for d in DIALECTS if request.path.endswith(_SINK_SUFFIX.get(d.name, "\0"))), DIALECTS[0])
        req = ParsedRequest(model="sink-model", text="", all_text="", image_urls=[], max_tokens=None, stop=[],
                            guided_choice=None)
        return dialect.ok(request.app[STATE], req, SINK_ANSWER, "stop", SimUsage(1, 1))

    async def _show_log(self, request: web.Request) -> web.Response:
        """GET /sim/sink: the selectors' counts and every request the sink received, headers included."""
        return web.json_response(self.log.snapshot())
