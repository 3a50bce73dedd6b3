"""`anthropic/<model>`: the Messages API through the official SDK's async client.

SDK retries are off (retries live once, in the runner). The 2.x SDKs speak API version
2026-10-21, which rejects temperature, top_p and top_k (even at their defaults) and no longer
has those arguments: they are sent only through an older SDK that still accepts them (API
2023-06-01). Prompt caching on Anthropic is explicit: nothing is cached unless a block
carries `cache_control`, so by default the last image of a request is marked, and every
query on the same image(s) reads the image prefix from the cache instead of paying again.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, ImagePart, Message, Response, Usage
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.sdk_errors import sdk_error

EPHEMERAL = {"type": "ephemeral"}


def thinking_enabled(params: GenParams) -> bool:
    """Extended thinking asked for through `extra` (the API then requires the default temperature)."""
    t = params.extra_dict().get("thinking")
    return isinstance(t, dict) and t.get("type") in ("enabled", "adaptive")


def anthropic_messages(messages: Sequence[Message], images: Sequence[PreparedImage], *,
                       cache_marker: bool = True) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """(system, messages) in Messages API form; image and text blocks keep their original order.

    System messages go to the `system` parameter (the API has no system role). With
    `cache_marker`, the last image block gets an ephemeral cache breakpoint so the prefix up to
    and including the images is cached across queries that share them.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    last_image: dict[str, Any] | None = None
    it = iter(images)
    for m in messages:
        if m.role == "system":
            system.append(m.text())
            continue
        blocks: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ImagePart):
                img = next(it)
                last_image = {"type": "image", "source": {"type": "base64", "media_type": img.mime, "data": img.b64()}}
                blocks.append(last_image)
            elif p.text:  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": p.text})
        out.append({"role": m.role, "content": blocks})
    if cache_marker and last_image is not None:
        last_image["cache_control"] = dict(EPHEMERAL)
    sys_param: str | list[dict[str, Any]] | None = None
    if len(system) == 1:
        sys_param = system[0]
    elif system:
        sys_param = [{"type": "text", "text": s} for s in system if s]
    return sys_param, out


def request_args(model: str, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage], *,
                 cache_marker: bool = True, sampling: bool = False) -> dict[str, Any]:
    """Keyword arguments for `messages.create`; unknown extras go to `extra_body` verbatim.

    seed is dropped (the API has none). temperature and top_p go only where the API takes them
    (`sampling`), and temperature never with thinking on (only the default is allowed then).
    """
    system, msgs = anthropic_messages(messages, images, cache_marker=cache_marker)
    args: dict[str, Any] = {"model": model, "messages": msgs, "max_tokens": params.max_tokens}
    if system is not None:
        args["system"] = system
    if sampling and not thinking_enabled(params):
        args["temperature"] = params.temperature
    if sampling and params.top_p is not None:
        args["top_p"] = params.top_p
    if params.stop:
        args["stop_sequences"] = list(params.stop)
    extra = params.extra_dict()
    if "thinking" in extra:
        args["thinking"] = extra.pop("thinking")
    if extra:
        args["extra_body"] = extra
    return args


def response_from_anthropic(d: dict[str, Any]) -> Response:
    """Messages JSON -> Response; a refusal raises ProviderError("refused"), a malformed body KeyError/TypeError.

    Anthropic's input_tokens counts only what follows the last cache breakpoint, so the total
    input is that plus the cache reads and writes.
    """
    stop_reason = d.get("stop_reason")
    blocks = d["content"]
    text = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
    if stop_reason == "refusal":
        raise ProviderError("refused", "content refused (stop_reason refusal)")
    thinking = "".join(b.get("thinking") or "" for b in blocks if b.get("type") == "thinking")
    u = d.get("usage") or {}
    read = int(u.get("cache_read_input_tokens") or 0)
    written = int(u.get("cache_creation_input_tokens") or 0)
    usage = Usage(input_tokens=int(u.get("input_tokens") or 0) + read + written,
                  output_tokens=int(u.get("output_tokens") or 0), cached_input_tokens=read)
    return Response(text=text, usage=usage, finish_reason=stop_reason, reasoning=thinking or None)


class AnthropicProvider:
    """One AsyncAnthropic client (aiohttp transport when the SDK ships it) shared by all requests."""

    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 120.0, cache_marker: bool = True):
        import anthropic  # lazy: only when this provider is used

        self._anthropic = anthropic
        self.spec = spec
        self.cache_marker = cache_marker
        kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": timeout_s}
        aio = getattr(anthropic, "DefaultAioHttpClient", None)
        if aio is not None:
            with contextlib.suppress(RuntimeError):  # the SDK was installed without its aiohttp extra
                kwargs["http_client"] = aio(timeout=timeout_s)
        if spec.base_urls:
            kwargs["base_url"] = spec.base_urls[0]
        self._client = anthropic.AsyncAnthropic(**kwargs)
        # SDKs before 1.0 (API 2023-06-01) still take sampling parameters; 2.x rejects them
        self.sampling = "temperature" in inspect.signature(self._client.messages.create).parameters

    def describe_params(self, params: GenParams) -> dict:
        d = params.to_dict()
        d["seed"] = None  # not supported by the Messages API: never sent
        if not self.sampling or thinking_enabled(params):
            d["temperature"] = None  # the model's default: the only value the API allows here
        if not self.sampling:
            d["top_p"] = None
            d["note"] = "seed, temperature and top_p are not accepted by Anthropic API 2026-10-21 (not sent)"
        if params.stop:
            d["stop_sequences"] = d.pop("stop")
        d["cache_control"] = "ephemeral on the last image" if self.cache_marker else None
        return d

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        args = request_args(self.spec.model, messages, params, images, cache_marker=self.cache_marker,
                            sampling=self.sampling)
        start = time.perf_counter()
        an = self._anthropic
        try:
            message = await self._client.messages.create(**args)
        except Exception as e:  # classified by sdk_error; anything else is re-raised
            err = sdk_error(an, e)
            if err is None:
                raise
            raise err from e
        try:
            out = response_from_anthropic(message.model_dump())
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise ProviderError("transient", "malformed response body") from e
        out.latency_s = time.perf_counter() - start
        return out

    async def close(self) -> None:
        await self._client.close()
