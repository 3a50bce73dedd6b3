"""How each hostile behaviour spoils a well-formed reply (see tests/hostile_routes.py for the routes).

Every spoiled reply starts from the reply the route would have sent, so only the named defect
differs. Where the answer sits differs per wire format:

| dialect   | answer slot                                  | "choices-empty"   | "no-candidates"  | usage           |
|-----------|----------------------------------------------|-------------------|------------------|-----------------|
| openai    | choices[0].message.content                   | choices: []       | choices absent   | usage           |
| anthropic | the first text block's text                  | content absent    | content: null    | usage           |
| gemini    | candidates[0].content.parts[last].text       | candidates: []    | candidates absent| usageMetadata   |

Azure OpenAI and OpenRouter reply in OpenAI's shape (their extra fields aside): spoiled as openai.

The byte-level defects (not JSON, a top-level array, bytes that are not UTF-8, a body past the
client's cap, with or without its length declared, a gzip bomb) are the same for every dialect,
as is "gzip-members", a sound reply compressed as two gzip members (no defect: a client must
answer normally).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import struct
import zlib
from collections.abc import Callable
from typing import Any

from aiohttp import web

HUGE_BYTES = 40 * 1024 * 1024  # past the clients' default 32 MB cap
BOMB_BYTES = 400 * 1024 * 1024  # what the gzip bomb inflates to; ~0.4 MB on the wire
_PAD_BLOCK = 1024 * 1024
_PAD_OPEN = b'{"evalkit_padding":"'
_NOT_UTF8 = b"\xff\xfe\xc3\x28"
_MARK = "@@evalkit-not-utf8@@"
_USAGE = {"openai": "usage", "anthropic": "usage", "gemini": "usageMetadata"}
_CONTAINER = {"openai": "choices", "anthropic": "content", "gemini": "candidates"}

JsonReply = dict[str, Any]
_SHAPE_OF = {"azure": "openai", "openrouter": "openai"}  # dialects that reply in another's shape


def shape_of(dialect: str) -> str:
    """The dialect whose reply shape `dialect` uses."""
    return _SHAPE_OF.get(dialect, dialect)


def _answer_slot(dialect: str, reply: JsonReply) -> tuple[dict[str, Any], str]:
    """(object, key) holding the answer text in a well-formed reply of `dialect`."""
    if dialect == "openai":
        return reply["choices"][0]["message"], "content"
    if dialect == "anthropic":
        blocks = reply["content"]
        texts = [b for b in blocks if b.get("type") == "text"]
        if not texts:  # an empty answer has no text block: give it one to spoil
            texts = [{"type": "text", "text": ""}]
            blocks.append(texts[0])
        return texts[0], "text"
    parts = reply["candidates"][0]["content"].setdefault("parts", [])
    if not parts:
        parts.append({"text": ""})
    return parts[-1], "text"


def _set_answer(value: Callable[[Any], Any]) -> Callable[[str, JsonReply], None]:
    def spoil(dialect: str, reply: JsonReply) -> None:
        holder, key = _answer_slot(dialect, reply)
        holder[key] = value(holder.get(key))
    return spoil


def _usage_string(dialect: str, reply: JsonReply) -> None:
    reply[_USAGE[dialect]] = "a great many tokens"


def _negated(counts: Any) -> Any:
    """Every integer count, nested ones included, made -7."""
    if isinstance(counts, dict):
        return {k: _negated(v) for k, v in counts.items()}
    return -7 if isinstance(counts, int) and not isinstance(counts, bool) else counts


def _usage_negative(dialect: str, reply: JsonReply) -> None:
    reply[_USAGE[dialect]] = _negated(reply.get(_USAGE[dialect]))


def _choices_empty(dialect: str, reply: JsonReply) -> None:
    if dialect == "anthropic":
        reply.pop("content", None)
    else:
        reply[_CONTAINER[dialect]] = []


def _no_candidates(dialect: str, reply: JsonReply) -> None:
    if dialect == "anthropic":
        reply["content"] = None
    else:
        reply.pop(_CONTAINER[dialect], None)
        reply.pop("promptFeedback", None)  # nothing says why: not a block, a broken reply


RESHAPE: dict[str, Callable[[str, JsonReply], None]] = {
    "content-number": _set_answer(lambda _: 42),
    "content-list": _set_answer(lambda _: [{"type": "image_url", "image_url": {"url": "data:,"}}]),
    "content-object": _set_answer(lambda text: {"type": "text", "text": text}),
    "usage-string": _usage_string,
    "usage-negative": _usage_negative,
    "choices-empty": _choices_empty,
    "no-candidates": _no_candidates,
}


def reshaped(behaviour: str, dialect: str, reply: JsonReply) -> web.Response:
    RESHAPE[behaviour](shape_of(dialect), reply)
    return web.json_response(reply)


def not_json() -> web.Response:
    return web.Response(status=200, body=b"<html><body>upstream said hello</body></html>",
                        content_type="application/json")


def json_array(reply: JsonReply) -> web.Response:
    return web.json_response([reply])


def invalid_utf8(dialect: str, reply: JsonReply) -> web.Response:
    holder, key = _answer_slot(shape_of(dialect), reply)
    holder[key] = _MARK
    body = json.dumps(reply).encode().replace(_MARK.encode(), _NOT_UTF8)
    return web.Response(status=200, body=body, headers={"Content-Type": "application/json; charset=utf-8"})


def _rest_of(reply: JsonReply) -> bytes:
    """The reply's members after the padding member: `",` then the object without its `{`."""
    encoded = json.dumps(reply).encode()
    return b'"' + (b"," + encoded[1:] if len(encoded) > 2 else b"}")


async def huge(request: web.Request, reply: JsonReply, size: int = HUGE_BYTES, *,
               declared: bool = True) -> web.StreamResponse:
    """Valid JSON of `size` bytes (a padding string member first), streamed a block at a time, with its
    Content-Length (`declared`) or chunked, so a client learns the size only by reading."""
    rest = _rest_of(reply)
    pad = max(0, size - len(_PAD_OPEN) - len(rest))
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    if declared:
        resp.content_length = len(_PAD_OPEN) + pad + len(rest)
    else:
        resp.enable_chunked_encoding()
    await resp.prepare(request)
    block = b"x" * _PAD_BLOCK
    with contextlib.suppress(ConnectionError):  # a capped client hangs up part way: that is the point
        await resp.write(_PAD_OPEN)
        for start in range(0, pad, _PAD_BLOCK):
            await resp.write(block[: min(_PAD_BLOCK, pad - start)])
        await resp.write(rest)
        await resp.write_eof()
    return resp


@functools.lru_cache(maxsize=2)
def _bomb_head(inflated: int) -> tuple[bytes, int, int]:
    """Raw deflate of the opening and `inflated` padding bytes, ending on a full flush, and the CRC and
    length so far. One compressed block of padding is repeated: after a full flush each block stands
    alone, so a 400 MB inflation costs a few milliseconds to build instead of seconds."""
    def flushed(data: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)

    block = b"x" * _PAD_BLOCK
    packed_block = flushed(block)
    whole, tail = divmod(inflated, _PAD_BLOCK)
    crc = zlib.crc32(_PAD_OPEN)
    for _ in range(whole):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(block[:tail], crc)
    head = flushed(_PAD_OPEN) + packed_block * whole + flushed(block[:tail])
    return head, crc, len(_PAD_OPEN) + inflated


def gzip_members(reply: JsonReply) -> web.Response:
    """A well-formed reply gzip-compressed as two members (legal, and rare): a client must answer
    normally, so its own decompression is exercised without any defect."""
    body = json.dumps(reply).encode()
    half = len(body) // 2
    packed = gzip.compress(body[:half], mtime=0) + gzip.compress(body[half:], mtime=0)
    return web.Response(status=200, body=packed,
                        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})


def gzip_bomb(reply: JsonReply, inflated: int = BOMB_BYTES) -> web.Response:
    """`Content-Encoding: gzip`, well under a megabyte on the wire, inflating past `inflated` bytes to
    valid JSON (a padding string member first)."""
    head, crc, length = _bomb_head(inflated)
    rest = _rest_of(reply)
    last = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = head + last.compress(rest) + last.flush()
    crc, length = zlib.crc32(rest, crc), length + len(rest)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, no time, unknown OS
    trailer = struct.pack("<II", crc & 0xFFFFFFFF, length & 0xFFFFFFFF)
    return web.Response(status=200, body=header + deflated + trailer,
                        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
