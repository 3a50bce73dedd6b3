"""The Anthropic Messages API (`POST /v1/messages`) as the simulated server reads and writes it.

Prompt caching follows Anthropic's documented rule, explicit breakpoints:

- Nothing is cached unless a block (a system text block or a message content block) carries
  `cache_control`; a top-level `cache_control` (automatic caching) marks the last block.
  At most 4 breakpoints per request, else 400, as the real API does.
- A breakpoint caches the prefix up to and including its block: the model, the system
  blocks and the message blocks in order (roles included), images identified by the sha1 of
  their base64 data. Any change before a breakpoint is a different prefix; a change of the
  thinking settings is one for message blocks (not for the system prompt), as documented.
- On each request the longest breakpoint prefix already in the cache is read
  (`cache_read_input_tokens`), and the prefixes of later breakpoints are written
  (`cache_creation_input_tokens` = the extra tokens up to the last breakpoint).
  `input_tokens` is what follows the last breakpoint (or the read prefix), so
  input + read + creation is the request's whole input.
- Entries live 5 minutes, refreshed on every hit; prefixes shorter than `min_cache_tokens`
  are not cached (the real minimum is 1024-4096 tokens by model; 0 here, because simulated
  images are small). Only successful answers touch the cache. The lookback over earlier
  block positions that the real service does is not simulated: only breakpoints match.
- Each server (SimState) has its own cache, so tests do not see each other's entries.

`--structured` arrives as `output_config.format` (structured outputs: the JSON answer is a text block, with
thinking on or off) or as a forced tool (the answer is a `tool_use` block's input); evalkit.sim.answer_forms.

Like the real API, version 2026-10-21 (the `anthropic-version` the 2.x SDKs send) rejects
temperature, top_p and top_k; older versions accept them, but temperature only at 1 with
thinking on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web
from PIL import Image

from evalkit.core import fingerprint
from evalkit.sim.machinery.wire import BadRequest, ParsedRequest, SimUsage
from evalkit.sim.model import server_estimate_tokens, server_image_tokens
from evalkit.sim.thinking import SIGNATURE

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState
    from evalkit.sim.thinking import Thought

MAX_BREAKPOINTS = 4
NO_SAMPLING_VERSION = "2026-10-21"  # first API version without sampling parameters
CACHE_TTL_S = 300.0
_ERROR_TYPES = {"bad_request": "invalid_request_error", "not_found": "not_found_error",
                "rate_limit": "rate_limit_error", "server": "api_error", "overloaded": "overloaded_error"}


@dataclass(frozen=True)
class AnthropicRequest(ParsedRequest):
    """A parsed Messages body plus what caching and shaping need: (prefix hash, tokens) per breakpoint."""

    breakpoints: tuple[tuple[str, int], ...] = ()
    thinking: bool = False


@dataclass
class PromptCache:
    """Cached prefixes of one simulated server: prefix hash -> (ready from, expires at).

    A prefix becomes readable only once the request that wrote it has been answered (Anthropic:
    "a cache entry is only available after the first response begins"), so requests sent
    together with one prefix all miss, as they do on the real API.
    """

    ttl_s: float = CACHE_TTL_S
    min_tokens: int = 0
    clock: Callable[[], float] = time.monotonic
    entries: dict[str, tuple[float, float]] = field(default_factory=dict)
    reads: int = 0
    writes: int = 0

    def use(self, breakpoints: tuple[tuple[str, int], ...], processing_s: float = 0.0) -> tuple[int, int]:
        """(read, created) tokens for a request's breakpoints; writes the prefixes it lacks.

        Called when the answer is ready; the request arrived `processing_s` earlier, and only
        entries ready by then can serve it."""
        now = self.clock()
        arrival = now - processing_s
        if len(self.entries) > 10_000:
            self.entries = {h: t for h, t in self.entries.items() if t[1] > now}
        usable = [(h, n) for h, n in breakpoints if n >= self.min_tokens]
        if not usable:
            return 0, 0
        hit = -1
        for i in range(len(usable) - 1, -1, -1):
            ready, expires = self.entries.get(usable[i][0], (math.inf, 0.0))
            if ready <= arrival < expires:
                hit = i
                break
        read = usable[hit][1] if hit >= 0 else 0
        for h, _ in usable[max(hit, 0):]:
            ready = self.entries.get(h, (now, 0.0))[0]
            self.entries[h] = (min(ready, now), now + self.ttl_s)  # refresh the hit, write the later ones
        created = usable[-1][1] - read if hit < len(usable) - 1 else 0
        self.reads += read > 0
        self.writes += created > 0
        return read, created


def _media(block: dict[str, Any], where: str) -> tuple[str, str]:
    """(media_type, base64 data) of an image block; only base64 sources are served."""
    src = block.get("source")
    if not isinstance(src, dict) or src.get("type") != "base64":
        raise BadRequest(f"{where}.source: only base64 image sources are supported by evalkit sim")
    media, data = src.get("media_type"), src.get("data")
    if not isinstance(media, str) or not isinstance(data, str) or not data:
        raise BadRequest(f"{where}.source: media_type and data are required")
    return media, data


class _Prefix:
    """Running hash and token count of a request's blocks, snapshotted at each breakpoint."""

    def __init__(self, model: str, sizes: Callable[[str, str], tuple[int, int]]) -> None:
        self._h = hashlib.sha256(model.encode())
        self._sizes = sizes
        self.texts: list[str] = []
        self.image_tokens = 0
        self.marks: list[tuple[str, int]] = []

    def text(self, role: str, text: str) -> None:
        self._h.update(f"\x1e{role}\x1ft\x1f{len(text)}\x1f".encode() + text.encode("utf-8", "replace"))
        self.texts.append(text)

    def image(self, role: str, media: str, data: str) -> None:
        digest = hashlib.sha1(data.encode("ascii", "replace")).hexdigest()
        self._h.update(f"\x1e{role}\x1fi\x1f{media}\x1f{digest}".encode())
        self.image_tokens += server_image_tokens(*self._sizes(digest, data))

    def mark(self) -> None:
        tokens = server_estimate_tokens("\n".join(self.texts)) + self.image_tokens  # as the server counts input
        self.marks.append((self._h.copy().hexdigest(), tokens))


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise BadRequest(f"{where}: must be a string or a list of content blocks")
    return content


class AnthropicDialect:
    """Anthropic Messages API, with explicit-breakpoint prompt caching (see the module docstring)."""

    name = "anthropic"
    routes = ("/v1/messages",)
    overloaded_status = 529

    def __init__(self, min_cache_tokens: int = 0, ttl_s: float = CACHE_TTL_S) -> None:
        self.min_cache_tokens = min_cache_tokens
        self.ttl_s = ttl_s
        self._caches: weakref.WeakKeyDictionary[SimState, PromptCache] = weakref.WeakKeyDictionary()
        self._sizes: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def cache_for(self, state: SimState) -> PromptCache:
        """The prompt cache of one server (created on first use, gone with the server)."""
        cache = self._caches.get(state)
        if cache is None:
            cache = self._caches[state] = PromptCache(self.ttl_s, self.min_cache_tokens)
        return cache

    def _size(self, digest: str, data: str) -> tuple[int, int]:
        """Image (width, height) from its header, memoised by the data's sha1."""
        size = self._sizes.get(digest)
        if size is None:
            try:
                with Image.open(io.BytesIO(base64.b64decode(data))) as img:
                    size = img.size
            except (binascii.Error, OSError, ValueError) as exc:
                raise BadRequest(f"could not decode image: {exc}") from exc
            self._sizes[digest] = size
            if len(self._sizes) > 4096:
                self._sizes.popitem(last=False)
        return size

    # -- request ---------------------------------------------------------------------------

    def parse(self, body: Any, request: web.Request) -> AnthropicRequest:
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        model, max_tokens, messages = body.get("model"), body.get("max_tokens"), body.get("messages")
        if not isinstance(model, str) or not model:
            raise BadRequest("model: Field required")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise BadRequest("max_tokens: Field required")
        if max_tokens < 1:
            raise BadRequest("max_tokens: must be greater than or equal to 1")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: at least one message is required")
        if body.get("stream"):
            raise BadRequest("streaming is not supported by evalkit sim")
        thinking = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in ("enabled", "adaptive")
        if request.headers.get("anthropic-version", "") >= NO_SAMPLING_VERSION:
            for name in ("temperature", "top_p", "top_k"):
                if name in body:
                    raise BadRequest(f"{name}: Extra inputs are not permitted")
        temperature = body.get("temperature")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, int | float)):
            raise BadRequest("temperature: must be a number")
        if thinking and temperature is not None and temperature != 1:
            raise BadRequest("`temperature` may only be set to 1 when thinking is enabled")

        prefix = _Prefix(model, self._size)
        think_tag = "|" + json.dumps(body.get("thinking"), sort_keys=True)  # part of message-block prefixes
        flat: list[tuple[dict[str, Any], str, str]] = []  # (block, role, where), system first
        system = body.get("system")
        if system is not None:
            flat += [(b, "system", f"system[{j}]") for j, b in enumerate(_blocks(system, "system"))]
        user_text = ""
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
                raise BadRequest(f"messages.{i}.role: must be 'user' or 'assistant'")
            blocks = _blocks(msg.get("content"), f"messages.{i}.content")
            flat += [(b, msg["role"] + think_tag, f"messages.{i}.content.{j}") for j, b in enumerate(blocks)]
            if msg["role"] == "user":
                user_text = "\n".join(b["text"] for b in blocks if b.get("type") == "text"
                                      and isinstance(b.get("text"), str))
        marked = [b for b, _, _ in flat if b.get("cache_control") is not None]
        auto_last = body.get("cache_control") is not None and flat and not flat[-1][0].get("cache_control")
        if len(marked) + bool(auto_last) > MAX_BREAKPOINTS:
            raise BadRequest(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided.")
        image_urls: list[str] = []
        for k, (block, role, where) in enumerate(flat):
            kind = block.get("type")
            if kind == "text":
                if not isinstance(block.get("text"), str) or not block["text"]:
                    raise BadRequest(f"{where}: text content blocks must be non-empty")
                prefix.text(role, block["text"])
            elif kind == "image" and role != "system":
                media, data = _media(block, where)
                prefix.image(role, media, data)
                image_urls.append(f"data:{media};base64,{data}")
            elif kind in ("thinking", "redacted_thinking") and role.startswith("assistant"):
                continue
            else:
                raise BadRequest(f"{where}: unsupported content block type {kind!r}")
            if block.get("cache_control") is not None or (auto_last and k == len(flat) - 1):
                prefix.mark()
        stop = body.get("stop_sequences")
        stops = [s for s in stop if isinstance(s, str) and s] if isinstance(stop, list) else []
        return AnthropicRequest(model=model, text=user_text, all_text="\n".join(prefix.texts),
                                image_urls=image_urls, max_tokens=max_tokens, stop=stops, guided_choice=None,
                                breakpoints=tuple(prefix.marks), thinking=thinking)

    # -- responses -------------------------------------------------------------------------

    def _message(self, state: SimState, model: str, content: list[dict[str, Any]], stop_reason: str,
                 stop_sequence: str | None, usage: dict[str, int]) -> dict[str, Any]:
        return {"id": "msg_" + state.next_id().removeprefix("chatcmpl-"), "type": "message", "role": "assistant",
                "model": state.config.snapshot or model, "content": content, "stop_reason": stop_reason, "stop_sequence": stop_sequence,
                "usage": usage}

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage,
           thought: Thought | None = None) -> web.Response:
        breakpoints = req.breakpoints if isinstance(req, AnthropicRequest) else ()
        read, created = self.cache_for(state).use(breakpoints, processing_s=state.latency_s)
        read, created = min(read, usage.input_tokens), min(created, max(0, usage.input_tokens - read))
        stop_reason, stop_sequence = "end_turn", None
        if finish == "length":
            stop_reason = "max_tokens"
        elif req.stop:
            stop_sequence = self._cut_by(state, req)
            stop_reason = "stop_sequence" if stop_sequence else "end_turn"
        blocks: list[dict[str, Any]] = []
        if thought is not None:  # the simulated model thinks (evalkit.sim.thinking); cut off: nothing after it
            blocks.append({"type": "thinking", "thinking": thought.text, "signature": SIGNATURE})
        elif isinstance(req, AnthropicRequest) and req.thinking and content:
            blocks.append({"type": "thinking", "thinking": "Looking at the image and the options.",
                           "signature": SIGNATURE})
        if content and req.answer_tool is not None:  # a forced tool (--structured): the answer is its input
            blocks.append({"type": "tool_use", "id": "toolu_" + state.next_id().removeprefix("chatcmpl-"),
                           "name": req.answer_tool, "input": json.loads(content)})
            stop_reason = "max_tokens" if finish == "length" else "tool_use"
        elif content:
            blocks.append({"type": "text", "text": content})
        body = self._message(state, req.model, blocks, stop_reason, stop_sequence, {
            "input_tokens": usage.input_tokens - read - created, "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": created, "cache_read_input_tokens": read})
        return web.json_response(body)

    @staticmethod
    def _cut_by(state: SimState, req: ParsedRequest) -> str | None:
        """Which stop sequence cut the reply, if any (the model is pure: ask it again)."""
        fps = [fingerprint.fingerprint_bytes(base64.b64decode(u.partition(",")[2])) for u in req.image_urls]
        full = state.model.reply(req.text, fps).content
        cuts = [(full.find(s), s) for s in req.stop if s in full]
        return min(cuts)[1] if cuts else None

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        payload = {"type": "error", "error": {"type": _ERROR_TYPES.get(kind, "api_error"), "message": message}}
        return web.json_response(payload, status=status, headers=headers)

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        return web.json_response(self._message(state, req.model, [], "refusal", None, {
            "input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}))
