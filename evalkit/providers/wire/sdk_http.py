"""The official SDKs' HTTP clients (httpx or its fork httpx2) held to evalkit's wire rules.

Both SDKs (anthropic, google-genai) read a reply's whole body inside the client's `send`, so a
size cap has to act inside the client. httpx runs its response event hooks after the headers
arrive and before the body is read: the hook here refuses any 3xx (the client is also told not
to follow), and swaps the response's byte stream for one that inflates gzip/deflate itself, in
bounded steps, counting decompressed bytes and raising `too_large` past the cap. The client then
decodes nothing (Content-Encoding is removed), and its buffer never holds more than the cap.
Requests advertise only the encodings this stream can inflate. A successful JSON body must be
UTF-8: the stream checks it, because an SDK that decodes with replacement characters (httpx's
`.text`) would otherwise turn broken bytes into a plausible answer.

The errors raised here are ProviderErrors; an SDK may wrap them (anthropic raises
APIConnectionError from them), so providers look for one in the exception's causes.
"""

from __future__ import annotations

import codecs
import functools
import zlib
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

from evalkit.providers.wire.http_limits import is_redirect, redirect_refused, too_large
from evalkit.providers.wire.reply_json import malformed

ACCEPTED_ENCODINGS = "gzip, deflate"
_GZIP = ("gzip", "x-gzip")
_IDENTITY = ("", "identity")
_STEP = 256 * 1024  # most bytes one inflate step may produce


class _Inflater:
    """Incremental gzip / deflate decoding in steps of at most _STEP output bytes."""

    def __init__(self, encoding: str):
        self._gzip = encoding in _GZIP
        self._wbits = zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS
        self._obj = zlib.decompressobj(self._wbits)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._obj.decompress(data, _STEP)
            except zlib.error:
                if not self._started and self._wbits == zlib.MAX_WBITS:  # "deflate" sent without its header
                    self._wbits = -zlib.MAX_WBITS
                    self._obj = zlib.decompressobj(self._wbits)
                    continue
                raise malformed("compressed body does not inflate") from None
            self._started = True
            if out:
                yield out
            if self._obj.eof and self._gzip and self._obj.unused_data:  # the next gzip member
                data = self._obj.unused_data
                self._obj = zlib.decompressobj(self._wbits)
                continue
            data = self._obj.unconsumed_tail
            if not data and len(out) < _STEP:
                return

    def check_complete(self) -> None:
        if self._started and not self._obj.eof:
            raise malformed("compressed body is truncated")


# Image edits answer with whole images (base64 in JSON): a larger cap than replies of text.
EDIT_MAX_BYTES = 256 * 1024 * 1024

def _check_utf8(decoder: codecs.IncrementalDecoder | None, piece: bytes, final: bool = False) -> None:
    if decoder is None:
        return
    try:
        decoder.decode(piece, final)
    except UnicodeDecodeError:
        raise malformed("body is not UTF-8") from None


@functools.cache
def _capped_stream_class(byte_stream_base: type) -> type:
    """A byte stream over another, inflated and capped; a subclass of the client's own AsyncByteStream
    class (httpx checks it)."""

    class CappedStream(byte_stream_base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, encoding: str, max_bytes: int, utf8: bool):
            self._inner, self._encoding, self._max, self._utf8 = inner, encoding, max_bytes, utf8

        async def __aiter__(self) -> AsyncIterator[bytes]:
            inflater = None if self._encoding in _IDENTITY else _Inflater(self._encoding)
            text = codecs.getincrementaldecoder("utf-8")("strict") if self._utf8 else None
            total = 0
            async for raw in self._inner:
                for piece in inflater.feed(raw) if inflater is not None else (raw,):
                    total += len(piece)
                    if total > self._max:
                        raise too_large(self._max)
                    _check_utf8(text, piece)
                    yield piece
            if inflater is not None:
                inflater.check_complete()
            _check_utf8(text, b"", final=True)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedStream


def guarded_client_kwargs(httpx: ModuleType, max_bytes: int) -> dict[str, Any]:
    """Keyword arguments for an `httpx.AsyncClient` (or httpx2's) that follows no redirect and caps
    every reply at `max_bytes` decompressed bytes. `httpx` is the module the SDK's client comes from."""
    stream_class = _capped_stream_class(httpx.AsyncByteStream)

    async def on_request(request: Any) -> None:
        request.headers["Accept-Encoding"] = ACCEPTED_ENCODINGS

    async def on_response(response: Any) -> None:
        if is_redirect(response.status_code):
            raise redirect_refused(response.status_code, response.headers.get("location"), str(response.request.url))
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in _IDENTITY + _GZIP + ("deflate",):
            raise malformed(f"Content-Encoding {encoding} was not asked for")
        declared = response.headers.get("content-length", "")
        if encoding in _IDENTITY and declared.isdigit() and int(declared) > max_bytes:
            raise too_large(max_bytes)  # said so up front: not a byte of it is read
        if encoding not in _IDENTITY:
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)
        must_be_utf8 = 200 <= response.status_code < 300 and "json" in response.headers.get("content-type", "")
        response.stream = stream_class(response.stream, encoding, max_bytes, must_be_utf8)

    return {"follow_redirects": False, "event_hooks": {"request": [on_request], "response": [on_response]}}


def httpx_module_of(client_class: type) -> ModuleType:
    """The httpx-family module (httpx or httpx2) a client class derives from."""
    import importlib

    for cls in client_class.__mro__:
        root = (cls.__module__ or "").split(".")[0]
        if root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise TypeError(f"{client_class.__name__} is not an httpx client")


def guarded_sdk_client(sdk: ModuleType, timeout_s: float, max_response_bytes: int) -> Any:
    """The HTTP client of a Stainless-built SDK (anthropic, openai) in its own class (aiohttp transport
    when installed with it), following no redirect and capping replies at `max_response_bytes`."""
    for name in ("DefaultAioHttpClient", "DefaultAsyncHttpxClient"):
        cls = getattr(sdk, name, None)
        if cls is None:
            continue
        try:
            return cls(timeout=timeout_s, **guarded_client_kwargs(httpx_module_of(cls), max_response_bytes))
        except RuntimeError:  # the SDK was installed without its aiohttp extra
            continue
    raise RuntimeError(f"this {sdk.__name__} SDK has no configurable HTTP client (DefaultAsyncHttpxClient)")
