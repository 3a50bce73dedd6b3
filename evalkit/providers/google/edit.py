"""`google/<model>` image edits (gemini-2.5-flash-image, ...): generate_content with image output.

The input image and the instruction go in one user turn; `response_modalities=["TEXT",
"IMAGE"]` asks for an image back, which arrives as a part with inline_data. The SDK's own
retries are off (one attempt: otherwise it silently retries dropped connections): retries
live once, in editing.with_retries. A safety block is "refused"; a reply without an image is "empty".
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from evalkit.core.errors import ProviderError, classify_status, retry_after_from_headers, server_reason
from evalkit.core.sdk import import_sdk
from evalkit.core.types import Usage
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.google.client import genai_httpx
from evalkit.providers.wire.sdk_http import EDIT_MAX_BYTES, guarded_client_kwargs

_BLOCKED = {"SAFETY", "IMAGE_SAFETY", "PROHIBITED_CONTENT", "IMAGE_PROHIBITED_CONTENT", "BLOCKLIST", "SPII",
            "RECITATION", "IMAGE_RECITATION"}
_TRANSPORT_MODULES = ("aiohttp", "httpx", "httpcore", "httpx2", "httpcore2")


def _name(value: Any) -> str:
    """An SDK enum or plain string as its bare name ("SAFETY")."""
    return str(getattr(value, "name", value) or "")


class GoogleImageEditor:
    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 300.0):
        genai = import_sdk("google.genai", spec.label)  # lazy: only when this editor is used
        from google.genai import errors, types

        self._types, self._errors = types, errors
        self.spec = spec
        httpx = genai_httpx()  # the SDK's client held to the wire rules: no redirect, a size cap
        self._http = httpx.AsyncClient(timeout=timeout_s, **guarded_client_kwargs(httpx, EDIT_MAX_BYTES))
        options = types.HttpOptions(timeout=int(timeout_s * 1000), retry_options=types.HttpRetryOptions(attempts=1),
                                    httpx_async_client=self._http)
        if spec.base_urls:
            options.base_url = spec.base_urls[0]
        self._client = genai.Client(api_key=api_key, vertexai=False, http_options=options)

    def _config(self, params: Mapping[str, Any]) -> Any:
        try:
            return self._types.GenerateContentConfig(response_modalities=["TEXT", "IMAGE"], **params)
        except (TypeError, ValueError) as e:  # pydantic's ValidationError is a ValueError
            raise ProviderError("permanent", f"bad Gemini edit parameters: {server_reason(e)}") from e

    async def edit(self, image: PreparedImage, instruction: str,
                   params: Mapping[str, Any] | None = None) -> tuple[bytes, str, Usage]:
        """One edit -> (first image part's bytes, mime, usage); failures as classified ProviderErrors."""
        types = self._types
        contents = [types.Part.from_bytes(data=image.data, mime_type=image.mime), types.Part.from_text(text=instruction)]
        config = self._config(params or {})
        try:
            resp = await self._client.aio.models.generate_content(model=self.spec.model, contents=contents,
                                                                  config=config)
        except self._errors.APIError as e:
            status = int(e.code or 500)
            headers = getattr(getattr(e, "response", None), "headers", None)
            raise ProviderError(classify_status(status), f"HTTP {status}: {e.status or type(e).__name__}",
                                status=status, retry_after=retry_after_from_headers(headers)) from e
        except (asyncio.TimeoutError, TimeoutError) as e:
            raise ProviderError("timeout", "request timed out") from e
        except (ConnectionError, OSError) as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        except Exception as e:  # the transport's own errors (aiohttp / httpx), whichever the SDK used
            if type(e).__module__.split(".")[0] in _TRANSPORT_MODULES:
                raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
            raise
        return _image_of(resp)

    async def close(self) -> None:
        try:
            await self._client.aio.aclose()
        finally:
            await self._http.aclose()  # the SDK leaves a client it was given to its owner


def _image_of(resp: Any) -> tuple[bytes, str, Usage]:
    """The first non-thought image part of a GenerateContentResponse, with usage."""
    feedback = getattr(resp, "prompt_feedback", None)
    if feedback is not None and getattr(feedback, "block_reason", None):
        raise ProviderError("refused", f"prompt blocked: {_name(feedback.block_reason)}")
    candidates = resp.candidates or []
    if not candidates:
        raise ProviderError("empty", "no candidates in the response")
    cand = candidates[0]
    finish = _name(cand.finish_reason)
    if finish in _BLOCKED:
        raise ProviderError("refused", f"blocked: finish_reason {finish}")
    parts = (cand.content.parts if cand.content is not None else None) or []
    for part in parts:
        blob = part.inline_data
        if blob is not None and blob.data and (blob.mime_type or "").startswith("image/") and not part.thought:
            meta = resp.usage_metadata
            usage = Usage(input_tokens=int(getattr(meta, "prompt_token_count", 0) or 0),
                          output_tokens=int(getattr(meta, "candidates_token_count", 0) or 0),
                          reasoning_tokens=int(getattr(meta, "thoughts_token_count", 0) or 0))
            return bytes(blob.data), str(blob.mime_type), usage
    raise ProviderError("empty", f"no image in the response (finish_reason {finish or 'none'})")
