"""`google/<model>`: the Gemini API through the official google-genai SDK's async client.

Retries are off: `retry_options` with one attempt, which also stops the SDK's hidden retries;
retries live once, in the runner. The SDK is given its HTTP client (httpx2, or httpx): one that
follows no redirect (aiohttp, the SDK's default transport, followed them with x-goog-api-key)
and caps replies at `max_response_bytes` decompressed (sdk_http). It hands back the raw body,
which evalkit reads itself (gemini_reply), resuming an unfinished answer as the SDK would. Thinking is off by default where the model lets it be
switched off (`thinking_budget=0` on 2.5/3.x Flash models); "pro" models cannot turn it off,
so nothing is sent and the output limit is raised to at least 8192 tokens, because Gemini
counts thoughts against `max_output_tokens` and a small limit would cut the answer. Models
without thinking (2.0, 1.5, image models, unknown names) get no thinking config at all: the
API rejects one there.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.core.errors import (
    MAX_HEADER_WAIT_S,
    MESSAGE_CHARS,
    ProviderError,
    classify_status,
    parse_retry_after,
    retry_after_from_headers,
    server_reason,
)
from evalkit.core.sdk import import_sdk
from evalkit.core.types import GenParams, ImagePart, Message, Response
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.google.reply import GeminiReply, joined_hops, reply_from_gemini
from evalkit.providers.image_setting import media_resolution_enum
from evalkit.providers.reasoning import budget_of
from evalkit.providers.registry import tiers_of
from evalkit.providers.structured import gemini_fields
from evalkit.providers.tiers import served_tier
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES
from evalkit.providers.wire.redact import Redactor, url_credentials
from evalkit.providers.wire.reply_json import json_object, malformed
from evalkit.providers.wire.sdk_errors import provider_error_in
from evalkit.providers.wire.sdk_http import guarded_client_kwargs

PRO_MIN_OUTPUT_TOKENS = 8192
MAX_CONTINUATIONS = 8  # hops of one unfinished answer, at most
_THINKING_MODEL = re.compile(r"gemini-(2\.5|[3-9](\.\d+)?)-")
_PRO = re.compile(r"(^|-)pro($|-)")
_TRANSPORT_MODULES = ("aiohttp", "httpx", "httpcore", "httpx2", "httpcore2")


def thinking_mode(model: str) -> str:
    """"off" (can and will be switched off), "always" (pro: cannot be), or "none" (no thinking)."""
    name = model.lower().removeprefix("models/")
    if not _THINKING_MODEL.search(name + "-"):
        return "none"
    if _PRO.search(name):
        return "always"
    return "none" if "image" in name else "off"


def _duration(value: Any) -> float | None:
    """A google.protobuf.Duration as JSON ("2s", "0.5s") or {seconds, nanos} -> seconds."""
    try:
        if isinstance(value, str) and value.endswith("s"):
            return parse_retry_after(value[:-1])  # "infs", "nans", "-1s" read as the headers are
        if isinstance(value, dict):
            seconds = float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9
            return min(seconds, MAX_HEADER_WAIT_S) if seconds >= 0 else None
    except (TypeError, ValueError):
        return None
    return None


def retry_delay(details: Any) -> float | None:
    """RetryInfo.retryDelay from an error body ({"error": {"details": [...]}}), if any."""
    err = details.get("error", details) if isinstance(details, dict) else None
    items = err.get("details") if isinstance(err, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            return _duration(item.get("retryDelay"))
    return None


def generation_settings(model: str, params: GenParams) -> dict[str, Any]:
    """GenerateContentConfig keyword arguments (without system_instruction) for one request.

    `extra` keys that are GenerateContentConfig fields (snake_case or camelCase) are passed
    through and win over the derived values; `thinking_budget` (or the reasoning switch's budget,
    providers/reasoning.py) becomes a ThinkingConfig. An
    unknown key is a permanent error: silently dropping it would change results unseen.
    """
    from google.genai import types  # lazy: only when this provider is used

    extra = params.extra_dict()
    budget = extra.pop("thinking_budget", None)
    if budget is None:  # --reasoning-effort / --thinking-budget (an --extra budget wins)
        budget = budget_of(params)
    kw: dict[str, Any] = {"temperature": params.temperature, "max_output_tokens": params.max_tokens}
    if params.stop:
        kw["stop_sequences"] = list(params.stop)
    if params.top_p is not None:
        kw["top_p"] = params.top_p
    if params.seed is not None:
        kw["seed"] = params.seed
    kw.update(gemini_fields(params))  # --structured: response_mime_type and response_schema (providers/structured.py)
    if params.media_resolution is not None:  # --media-resolution: the request-level setting (providers/image_setting.py)
        kw["media_resolution"] = media_resolution_enum(params.media_resolution)
    mode = thinking_mode(model)
    explicit = "thinking_config" in extra or "thinkingConfig" in extra
    if budget is not None:
        kw["thinking_config"] = {"thinking_budget": int(budget)}
    elif mode == "off" and not explicit:
        kw["thinking_config"] = {"thinking_budget": 0}
    thinks = (mode == "always" and budget is None) or (budget is not None and int(budget) != 0)
    if thinks:  # thoughts count against max_output_tokens: leave room for the answer
        room = int(budget) + params.max_tokens if budget is not None and int(budget) > 0 else 0
        kw["max_output_tokens"] = max(params.max_tokens, PRO_MIN_OUTPUT_TOKENS, room)
    fields = types.GenerateContentConfig.model_fields
    names = set(fields) | {f.alias for f in fields.values() if f.alias}
    unknown = sorted(k for k in extra if k not in names)
    if unknown:
        raise ProviderError("permanent", f"not GenerateContentConfig fields: {', '.join(unknown)}")
    return {**kw, **extra}


def gemini_contents(messages: Sequence[Message], images: Sequence[PreparedImage]) -> tuple[str | None, list[Any]]:
    """(system instruction, contents): system messages become the instruction; parts keep their order."""
    from google.genai import types

    system: list[str] = []
    contents: list[Any] = []
    it = iter(images)
    for m in messages:
        if m.role == "system":
            system.append(m.text())
            continue
        parts = []
        for p in m.parts:
            if isinstance(p, ImagePart):
                img = next(it)
                parts.append(types.Part.from_bytes(data=img.data, mime_type=img.mime))
            elif p.text:
                parts.append(types.Part.from_text(text=p.text))
        contents.append(types.Content(role="model" if m.role == "assistant" else "user", parts=parts))
    return ("\n\n".join(s for s in system if s) or None), contents


def genai_httpx() -> Any:
    """httpx2 where installed (the SDK's own preference), else httpx."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


class GoogleProvider:
    """One genai.Client (its aio side) shared by all requests of a run."""

    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 120.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        genai = import_sdk("google.genai", spec.label)  # lazy: only when this provider is used
        from google.genai import errors, types

        self._types, self._errors = types, errors
        self.spec = spec
        self.max_response_bytes = max_response_bytes
        self._redact = Redactor([api_key, *(s for u in spec.base_urls for s in url_credentials(u))])
        httpx = genai_httpx()
        self._http = httpx.AsyncClient(timeout=timeout_s, limits=httpx.Limits(max_connections=None),
                                       **guarded_client_kwargs(httpx, max_response_bytes))
        options = types.HttpOptions(timeout=int(timeout_s * 1000), retry_options=types.HttpRetryOptions(attempts=1),
                                    httpx_async_client=self._http)
        self._client = self._make_client(genai, options, api_key)
        self._tiers = tiers_of(spec.provider)  # --service-tier: its record says how

    def _make_client(self, genai: Any, options: Any, api_key: str) -> Any:
        """The Gemini API's client (Vertex AI's: providers/vertex/client.py)."""
        if self.spec.base_urls:
            options.base_url = self.spec.base_urls[0]
        return genai.Client(api_key=api_key, vertexai=False, http_options=options)

    def describe_params(self, params: GenParams) -> dict:
        d = params.to_dict()
        try:
            kw = generation_settings(self.spec.model, params)
        except ProviderError as e:
            d["error"] = e.message
            return d
        d["max_tokens"] = kw.pop("max_output_tokens", params.max_tokens)
        d["stop_sequences"] = d.pop("stop")
        thinking = kw.get("thinking_config") or kw.get("thinkingConfig")
        d["thinking_budget"] = thinking.get("thinking_budget") if isinstance(thinking, dict) else None
        if thinking_mode(self.spec.model) == "always" and d["thinking_budget"] is None:
            d["note"] = (f"thinking cannot be turned off for {self.spec.model}: model default budget, "
                         f"max_output_tokens raised to at least {PRO_MIN_OUTPUT_TOKENS}")
        return d

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        system, contents = gemini_contents(messages, images)
        settings = generation_settings(self.spec.model, params)
        if system:
            settings["system_instruction"] = system
        settings["should_return_http_response"] = True  # the raw body: evalkit reads it (gemini_reply)
        tier = self._tiers.wire_value(params.service_tier) if self._tiers is not None else None
        if tier is not None:  # a delivery setting beside the request (never in its key), where the record says
            where, name = self._tiers.where("request")
            if where == "header":  # Vertex AI's X-Vertex-AI-LLM-Shared-Request-Type, this request's own
                settings["http_options"] = self._types.HttpOptions(headers={name: tier})
            else:  # the Gemini API's serviceTier
                settings["service_tier"] = tier
        try:
            config = self._types.GenerateContentConfig(**settings)
        except (TypeError, ValueError) as e:  # pydantic's ValidationError is a ValueError
            raise ProviderError("permanent", f"bad Gemini parameters: {self._clean(server_reason(e))}") from e
        start = time.perf_counter()
        reply = await self._ask(contents, config, params.service_tier)
        out = reply.response
        for _ in range(MAX_CONTINUATIONS):
            if reply.continuation is None:
                break
            reply = await self._ask(contents, config.model_copy(update={"continuation_token": reply.continuation}),
                                    params.service_tier)
            out = joined_hops(out, reply.response)
        out.text, out.reasoning = self._redact(out.text), self._redact.optional(out.reasoning)
        out.latency_s = time.perf_counter() - start
        return out

    async def _ask(self, contents: list[Any], config: Any, tier: str | None = None) -> GeminiReply:
        """One generateContent request, its reply read (with the tier that served it, which only a header
        says: GEMINI_TIERS); every failure a classified ProviderError."""
        try:
            resp = await self._client.aio.models.generate_content(model=self.spec.model, contents=contents,
                                                                  config=config)
            raw = resp.sdk_http_response
            body = json_object(raw.body if raw is not None and raw.body is not None else b"")
            reply = reply_from_gemini(body)
            reply.response.served_tier = served_tier(self._tiers, tier, body, getattr(raw, "headers", None))
        except ProviderError as e:  # evalkit's own: the reply's checks, the size cap, a redirect
            self._redact.error(e)
            raise
        except self._errors.APIError as e:
            raise self._classify(e) from e
        except (asyncio.TimeoutError, TimeoutError) as e:
            raise ProviderError("timeout", "request timed out") from e
        except (ConnectionError, OSError) as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        except Exception as e:  # the transport's errors, or anything the SDK raised while reading the reply
            raise self._unexpected(e) from e
        return reply

    def _unexpected(self, e: Exception) -> ProviderError:
        own = provider_error_in(e)
        if own is not None:
            return self._redact.error(own)
        if type(e).__module__.split(".")[0] in _TRANSPORT_MODULES:
            if "Timeout" in type(e).__name__:
                return ProviderError("timeout", "request timed out")
            return ProviderError("transient", f"connection error: {type(e).__name__}")
        return malformed(f"unreadable ({type(e).__name__})")

    def _classify(self, e: Any) -> ProviderError:
        """HTTP status -> kind; the wait from Retry-After if sent, else from RetryInfo."""
        status = int(e.code or 0)
        kind = classify_status(status) if status else "transient"
        headers = getattr(getattr(e, "response", None), "headers", None)
        wait = retry_after_from_headers(headers) if headers is not None else None
        if wait is None:
            wait = retry_delay(e.details)
        text = self._clean(f"HTTP {status}: {e.status or type(e).__name__}: {server_reason(e.message or '')}")
        return ProviderError(kind, text, status=status or None, retry_after=wait)

    def _clean(self, text: str) -> str:
        """One line, bounded, and never the key (an echoing proxy must not leak it into records); the callers
        bound the server's words (server_reason), so the lead-in never crowds them out."""
        return self._redact(" ".join(text.split()))[:MESSAGE_CHARS]

    async def close(self) -> None:
        try:
            await self._client.aio.aclose()
        finally:
            await self._http.aclose()  # the SDK leaves a client it was given to its owner


def google_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> GoogleProvider:
    """The client its record names (evalkit.providers.registry): one signature for every provider."""
    del env  # the key is read by the caller
    return GoogleProvider(spec, api_key=api_key or "", timeout_s=timeout_s, max_response_bytes=max_response_bytes)
