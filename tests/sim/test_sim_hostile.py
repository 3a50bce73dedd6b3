"""The simulator's hostile routes: what each behaviour puts on the wire, per dialect, and the sink.

Plain aiohttp requests (no decompression, no redirects followed) so the bytes are seen as sent.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from urllib.parse import quote

import aiohttp
import pytest
from hostile_bodies import BOMB_BYTES, HUGE_BYTES
from hostile_routes import BEHAVIOURS, HostileRoutes, parse_selector

from evalkit.sim.server import SimConfig, start_sim

KEY = "sk-sim/Hostile+Key9="
# one request per dialect: its path, its body, the header carrying the key
DIALECTS = {
    "openai": ("/v1/chat/completions", {"model": "sim-model", "messages": [{"role": "user", "content": "Hi?"}]},
               {"Authorization": f"Bearer {KEY}"}),
    "anthropic": ("/v1/messages", {"model": "sim-model", "max_tokens": 8,
                                   "messages": [{"role": "user", "content": "Hi?"}]}, {"x-api-key": KEY}),
    "gemini": ("/v1beta/models/sim-model:generateContent", {"contents": [{"role": "user", "parts": [{"text": "Hi?"}]}]},
               {"x-goog-api-key": KEY}),
}


def answer_slot(dialect: str, reply: dict):
    """The value where the dialect keeps the answer text (the table in tests/hostile_bodies.py)."""
    if dialect == "openai":
        return reply["choices"][0]["message"]["content"]
    if dialect == "anthropic":
        return next(b for b in reply["content"] if b.get("type") == "text")["text"]
    return reply["candidates"][0]["content"]["parts"][-1]["text"]


def counts(usage: dict) -> list:
    """Every number in a usage object, nested ones included."""
    return [n for v in usage.values() for n in (counts(v) if isinstance(v, dict) else [v])]


async def send(session: aiohttp.ClientSession, url: str, dialect: str, selector: str | None) -> aiohttp.ClientResponse:
    path, payload, headers = DIALECTS[dialect]
    prefix = f"/hostile/{selector}" if selector else ""
    resp = await session.post(url + prefix + path, json=payload, headers=headers, allow_redirects=False,
                              auto_decompress=False)
    await resp.read()
    return resp


@pytest.fixture
def hostile():
    return HostileRoutes()


@pytest.fixture
async def sim(hostile):
    async with await start_sim(SimConfig(), routes=hostile) as server:
        yield server


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


def test_selectors():
    assert parse_selector("content-number") == ("content-number", 1)
    assert parse_selector("gzip-bomb:4") == ("gzip-bomb", 4)
    for bad in ("nonsense", "content-number:0", "content-number:x", "content-number:"):
        with pytest.raises(ValueError):
            parse_selector(bad)
    assert len(BEHAVIOURS) == len(set(BEHAVIOURS)) == 18


async def test_every_kth_request_misbehaves_and_is_no_completion(sim, hostile, session):
    got = []
    for _ in range(6):
        resp = await send(session, sim.url, "openai", "content-number:3")
        got.append(answer_slot("openai", json.loads(await resp.read())))
    assert [isinstance(g, str) for g in got] == [True, True, False, True, True, False]
    assert got[2] == got[5] == 42
    counters = sim.counters.snapshot()
    assert counters["requests"] == 6 and counters["completions"] == 4
    assert hostile.log.snapshot() == {"seen": {"content-number:3": 6}, "spoiled": {"content-number:3": 2}, "sink": []}
    resp = await send(session, sim.url, "gemini", "no-such-thing")
    assert resp.status == 404 and "unknown hostile behaviour" in (await resp.json())["error"]["message"]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_reshaped_replies_per_dialect(sim, session, dialect):
    seen = {}
    for behaviour in ("content-number", "content-list", "content-object", "usage-string", "usage-negative",
                      "choices-empty", "no-candidates"):
        resp = await send(session, sim.url, dialect, behaviour)
        assert resp.status == 200
        seen[behaviour] = json.loads(await resp.read())
    assert answer_slot(dialect, seen["content-number"]) == 42
    assert answer_slot(dialect, seen["content-list"]) == [{"type": "image_url", "image_url": {"url": "data:,"}}]
    obj = answer_slot(dialect, seen["content-object"])
    assert obj["type"] == "text" and isinstance(obj["text"], str) and obj["text"]
    usage = "usageMetadata" if dialect == "gemini" else "usage"
    assert seen["usage-string"][usage] == "a great many tokens"
    assert set(counts(seen["usage-negative"][usage])) == {-7}
    container = {"openai": "choices", "anthropic": "content", "gemini": "candidates"}[dialect]
    if dialect == "anthropic":
        assert container not in seen["choices-empty"] and seen["no-candidates"][container] is None
    else:
        assert seen["choices-empty"][container] == [] and container not in seen["no-candidates"]
    assert "promptFeedback" not in seen["no-candidates"]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_byte_level_defects(sim, session, dialect):
    resp = await send(session, sim.url, dialect, "not-json")
    with pytest.raises(ValueError):
        json.loads(await resp.read())
    resp = await send(session, sim.url, dialect, "json-array")
    array = json.loads(await resp.read())
    assert isinstance(array, list) and len(array) == 1 and isinstance(answer_slot(dialect, array[0]), str)
    resp = await send(session, sim.url, dialect, "invalid-utf8")
    raw = await resp.read()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert resp.status == 200 and answer_slot(dialect, json.loads(raw.decode("utf-8", "replace"))).startswith("\ufffd")
    resp = await send(session, sim.url, dialect, "gzip-members")
    packed = await resp.read()
    assert resp.headers["Content-Encoding"] == "gzip" and packed.count(b"\x1f\x8b\x08") == 2
    assert answer_slot(dialect, json.loads(gzip.decompress(packed)))


async def test_huge_bodies_are_valid_json_of_40_mb(sim, session):
    for behaviour, declared in (("huge", True), ("huge-chunked", False)):
        resp = await send(session, sim.url, "openai", behaviour)
        body = await resp.read()
        assert len(body) == HUGE_BYTES
        assert ("Content-Length" in resp.headers) is declared and resp.headers.get("Transfer-Encoding") == \
            (None if declared else "chunked")
        reply = json.loads(body)
        assert len(reply["evalkit_padding"]) > HUGE_BYTES - 1000 and answer_slot("openai", reply)


async def test_the_gzip_bomb_is_small_and_inflates_to_valid_json(sim, session):
    resp = await send(session, sim.url, "anthropic", "gzip-bomb")
    packed = await resp.read()
    assert resp.headers["Content-Encoding"] == "gzip" and len(packed) < 1024 * 1024
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    total, head, tail = 0, b"", b""
    data = packed
    while data or not inflater.eof:
        piece = inflater.decompress(data, 1 << 20)
        data = inflater.unconsumed_tail
        total += len(piece)
        head = head or piece[:64]
        tail = (tail + piece)[-4096:]
        if not piece and not data:
            break
    assert inflater.eof and total > BOMB_BYTES
    assert head.startswith(b'{"evalkit_padding":"xxxxxxxx')
    rest = json.loads(b'{"evalkit_padding":"' + tail.lstrip(b"x"))
    assert rest["type"] == "message" and answer_slot("anthropic", rest)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_redirects_point_at_the_sink_on_another_origin(sim, hostile, session, dialect):
    path = DIALECTS[dialect][0]
    port = sim.url.rsplit(":", 1)[1]
    for status in (301, 302, 307):
        resp = await send(session, sim.url, dialect, f"redirect-{status}")
        assert resp.status == status and resp.headers["Location"] == f"http://localhost:{port}/sink{path}"
    async with session.get(f"http://localhost:{port}/sink{path}", headers={"x-probe": "seen"}) as followed:
        reply = await followed.json()
    assert answer_slot(dialect, reply) == "A"
    async with session.get(sim.url + "/sim/sink") as log:
        sink = (await log.json())["sink"]
    assert [(r["method"], r["path"], r["body_bytes"]) for r in sink] == [("GET", f"/sink{path}", 0)]
    assert ["x-probe", "seen"] in sink[0]["headers"]
    async with session.post(sim.url + "/sim/reset"):
        pass
    assert hostile.log.snapshot() == {"seen": {}, "spoiled": {}, "sink": []}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_echo_key_repeats_the_key_in_three_forms(sim, session, dialect):
    resp = await send(session, sim.url, dialect, "echo-key")
    text = (await resp.read()).decode()
    assert resp.status == 400 and "API key not valid" in text
    for form in (KEY, quote(KEY, safe=""), base64.b64encode(KEY.encode()).decode()):
        assert form in text
