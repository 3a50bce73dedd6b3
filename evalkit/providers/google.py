"""`google/<model>`: the Gemini API through the official google-genai SDK's async client.

Retries are off: `retry_options` with one attempt, which also stops the SDK's hidden retry of
aiohttp connection errors (it sleeps 1-10 s and tries again unless retry options are set);
retries live once, in the runner. Thinking is off by default where the model lets it be
switched off (`thinking_budget=0` on 2.5/3.x Flash models); "pro" models cannot turn it off,
so nothing is sent and the output limit is raised to at least 8192 tokens, because Gemini
counts thoughts against `max_output_tokens` and a small limit would cut the answer. Models
without thinking (2.0, 1.5, image models, unknown names) get no thinking config at all: the
API rejects one there.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import ProviderError, classify_status
from evalkit.core.types import GenParams, ImagePart, Message, Response, Usage
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.openai_compat import retry_after_from_headers

PRO_MIN_OUTPUT_TOKENS = 8192
_THINKING_MODEL = re.compile(r"gemini-(2\.5|[3-9](\.\d+)?)-")
_PRO = re.compile(r"(^|-)pro($|-)")
# finish reasons that mean the model declined on content grounds (a refusal when no text came back)
BLOCKED = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY",
                     "IMAGE_PROHIBITED_CONTENT"})
_TRANSPORT_MODULES = ("aiohttp", "httpx", "httpcore")


def thinking_mode(model: str) -> str:
    """"off" (can and will be switched off), "always" (pro: cannot be), or "none" (no thinking)."""
    name = model.lower().removeprefix("models/")
    if not _THINKING_MODEL.search(name + "-"):
        return "none"
    if _PRO.search(name):
        return "always"
    return "none" if "image" in name else "off"


def _name(value: Any) -> str:
    """An SDK enum or plain string as its bare name ("SAFETY")."""
    return str(getattr(value, "name", value) or "")


def _duration(value: Any) -> float | None:
    """A google.protobuf.Duration as JSON ("2s", "0.5s") or {seconds, nanos} -> seconds."""
    try:
        if isinstance(value, str) and value.endswith("s"):
            return max(0.0, float(value[:-1]))
        if isinstance(value, dict):
            return max(0.0, float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9)
    except ValueError:
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
    through and win over the derived values; `thinking_budget` becomes a ThinkingConfig. An
    unknown key is a permanent error: silently dropping it would change results unseen.
    """
    from google.genai import types  # lazy: only when this provider is used

    extra = params.extra_dict()
    budget = extra.pop("thinking_budget", None)
    kw: dict[str, Any] = {"temperature": params.temperature, "max_output_tokens": params.max_tokens}
    if params.stop:
        kw["stop_sequences"] = list(params.stop)
    if params.top_p is not None:
        kw["top_p"] = params.top_p
    if params.seed is not None:
        kw["seed"] = params.seed
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


def response_from_gemini(resp: Any) -> Response:
    """GenerateContentResponse -> Response; a safety block raises ProviderError("refused")."""
    meta = resp.usage_metadata
    usage = Usage(input_tokens=int(getattr(meta, "prompt_token_count", 0) or 0),
                  output_tokens=int(getattr(meta, "candidates_token_count", 0) or 0),
                  cached_input_tokens=int(getattr(meta, "cached_content_token_count", 0) or 0),
                  reasoning_tokens=int(getattr(meta, "thoughts_token_count", 0) or 0))
    feedback = resp.prompt_feedback
    if feedback is not None and feedback.block_reason:
        raise ProviderError("refused", f"prompt blocked: {_name(feedback.block_reason)}")
    candidates = resp.candidates or []
    if not candidates:
        return Response(text="", usage=usage)  # empty: the runner retries it
    cand = candidates[0]
    finish = _name(cand.finish_reason) or None
    parts = (cand.content.parts if cand.content is not None else None) or []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    thoughts = "".join(p.text for p in parts if p.text and p.thought)
    if finish in BLOCKED and not text.strip():
        raise ProviderError("refused", f"blocked: finish_reason {finish}")
    return Response(text=text, usage=usage, finish_reason=finish, reasoning=thoughts or None)


class GoogleProvider:
    """One genai.Client (its aio side) shared by all requests of a run."""

    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 120.0):
        from google import genai  # lazy: only when this provider is used
        from google.genai import errors, types

        self._types, self._errors = types, errors
        self.spec = spec
        self._key = api_key
        options = types.HttpOptions(timeout=int(timeout_s * 1000), retry_options=types.HttpRetryOptions(attempts=1))
        if spec.base_urls:
            options.base_url = spec.base_urls[0]
        self._client = genai.Client(api_key=api_key, vertexai=False, http_options=options)

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
        try:
            config = self._types.GenerateContentConfig(**settings)
        except (TypeError, ValueError) as e:  # pydantic's ValidationError is a ValueError
            raise ProviderError("permanent", f"bad Gemini parameters: {self._clean(str(e))}") from e
        start = time.perf_counter()
        try:
            resp = await self._client.aio.models.generate_content(model=self.spec.model, contents=contents,
                                                                  config=config)
        except self._errors.APIError as e:
            raise self._classify(e) from e
        except (asyncio.TimeoutError, TimeoutError) as e:
            raise ProviderError("timeout", "request timed out") from e
        except (ConnectionError, OSError) as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        except ValueError as e:  # an unreadable body (JSON or pydantic)
            raise ProviderError("transient", "malformed response body") from e
        except Exception as e:  # the transport's own errors (aiohttp / httpx), whichever the SDK used
            if type(e).__module__.split(".")[0] in _TRANSPORT_MODULES:
                raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
            raise
        try:
            out = response_from_gemini(resp)
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise ProviderError("transient", "malformed response body") from e
        out.latency_s = time.perf_counter() - start
        return out

    def _classify(self, e: Any) -> ProviderError:
        """HTTP status -> kind; the wait from Retry-After if sent, else from RetryInfo."""
        status = int(e.code or 0)
        kind = classify_status(status) if status else "transient"
        headers = getattr(getattr(e, "response", None), "headers", None)
        wait = retry_after_from_headers(headers) if headers is not None else None
        if wait is None:
            wait = retry_delay(e.details)
        text = self._clean(f"HTTP {status}: {e.status or type(e).__name__}: {e.message or ''}")
        return ProviderError(kind, text, status=status or None, retry_after=wait)

    def _clean(self, text: str) -> str:
        """One line, bounded, and never the key (an echoing proxy must not leak it into records)."""
        text = " ".join(text.split())[:300]
        return text.replace(self._key, "***") if self._key else text

    async def close(self) -> None:
        await self._client.aio.aclose()
