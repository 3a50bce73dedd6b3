"""`openai/<model>` image edits (gpt-image-1, ...): `client.images.edit` through the official SDK.

The SDK on its aiohttp transport, with SDK retries off (retries live once,
in editing.with_retries) and the same error classification, plus the Images API's way of
declining: a 400 whose code is `moderation_blocked` (or the older `content_policy_violation`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from evalkit.core.errors import ProviderError, classify_status, retry_after_from_headers
from evalkit.core.sdk import import_sdk
from evalkit.core.types import Usage
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.wire.sdk_http import EDIT_MAX_BYTES, guarded_sdk_client

# Parameters `images.edit` takes by name; anything else goes to the form as extra_body.
_KNOWN = ("background", "input_fidelity", "n", "output_compression", "output_format", "quality",
          "response_format", "size", "user", "safety_identifier")
_REFUSAL_CODES = ("moderation_blocked", "content_policy_violation")
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}


class OpenAIImageEditor:
    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 300.0):
        openai = import_sdk("openai", spec.label)  # lazy: only when this editor is used

        self._openai = openai
        self.spec = spec
        kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": timeout_s,
                                  "http_client": guarded_sdk_client(openai, timeout_s, EDIT_MAX_BYTES)}
        if spec.base_urls:
            kwargs["base_url"] = spec.base_urls[0]
        self._client = openai.AsyncOpenAI(**kwargs)

    def _arguments(self, image: PreparedImage, instruction: str, params: Mapping[str, Any]) -> dict[str, Any]:
        args: dict[str, Any] = {k: v for k, v in params.items() if k in _KNOWN}
        extra = {k: v for k, v in params.items() if k not in _KNOWN}
        if self.spec.model.startswith("dall-e"):  # DALL-E answers with a URL unless asked for base64
            args.setdefault("response_format", "b64_json")
        upload = (f"image.{_EXT.get(image.mime, 'png')}", image.data, image.mime)
        return {"model": self.spec.model, "image": upload, "prompt": instruction, **args,
                "extra_body": extra or None}

    async def edit(self, image: PreparedImage, instruction: str,
                   params: Mapping[str, Any] | None = None) -> tuple[bytes, str, Usage]:
        """One edit -> (first image's bytes, mime, usage); failures as classified ProviderErrors."""
        oa = self._openai
        try:
            resp = await self._client.images.edit(**self._arguments(image, instruction, params or {}))
        except oa.APITimeoutError as e:
            raise ProviderError("timeout", "request timed out") from e
        except oa.APIConnectionError as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        except oa.APIStatusError as e:
            code = getattr(e, "code", None)
            kind = "refused" if e.status_code == 400 and code in _REFUSAL_CODES else classify_status(e.status_code)
            raise ProviderError(kind, f"HTTP {e.status_code}: {type(e).__name__}" + (f" ({code})" if code else ""),
                                status=e.status_code, retry_after=retry_after_from_headers(e.response.headers)) from e
        except (oa.APIResponseValidationError, ValueError) as e:
            raise ProviderError("transient", "malformed response body") from e
        first = (resp.data or [None])[0]
        b64 = getattr(first, "b64_json", None)
        if not b64:
            raise ProviderError("empty", "no image in the response")
        try:
            data = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ProviderError("transient", "malformed base64 image in the response") from e
        fmt = resp.output_format or (params or {}).get("output_format") or "png"
        mime = "image/jpeg" if fmt in ("jpeg", "jpg") else f"image/{fmt}"
        u = resp.usage
        usage = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens) if u is not None else Usage()
        return data, mime, usage

    async def close(self) -> None:
        await self._client.close()
