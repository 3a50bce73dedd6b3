"""`openai/<model>`: the official SDK's async client on its aiohttp transport.

The aiohttp transport is several times faster than the default one at high concurrency.
SDK retries are off: retries live once, in the runner. Requests go through the client's
`post` (the SDK's documented way to call an endpoint with a body of one's own): the SDK's
transport, authentication, headers, timeouts and error types, without its per-request
validation of the parameters and parsing of the reply into models, which cost more CPU than
the rest of the request (about 5 ms against 2 ms per request, bench/overhead.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, Message, Response
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.openai_format import chat_body, openai_messages, response_from_openai
from evalkit.providers.sdk_errors import sdk_error

_JSON = {"headers": {"Content-Type": "application/json"}}
# Reasoning models accept only the default temperature.
_FIXED_TEMPERATURE = re.compile(r"^(o\d|gpt-5)")


class OpenAISDKProvider:
    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 120.0):
        import openai  # lazy: only when this provider is used

        self._openai = openai
        self.spec = spec
        kwargs = {"api_key": api_key, "max_retries": 0, "timeout": timeout_s,
                  "http_client": openai.DefaultAioHttpClient(timeout=timeout_s)}
        if spec.base_urls:
            kwargs["base_url"] = spec.base_urls[0]
        self._client = openai.AsyncOpenAI(**kwargs)
        self._send_temperature = not _FIXED_TEMPERATURE.match(spec.model)

    def describe_params(self, params: GenParams) -> dict:
        d = params.to_dict()
        if not self._send_temperature:
            d["temperature"] = None
        return d

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        body = chat_body(self.spec.model, openai_messages(messages, images), params,
                         max_tokens_field="max_completion_tokens", send_temperature=self._send_temperature)
        payload = json.dumps(body, ensure_ascii=False).encode()
        start = time.perf_counter()
        oa = self._openai
        try:
            text = await self._client.post("/chat/completions", cast_to=str, content=payload, options=_JSON)
        except Exception as e:  # classified by sdk_error; anything else is re-raised
            err = sdk_error(oa, e)
            if err is None:
                raise
            raise err from e
        try:
            out = response_from_openai(json.loads(text))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise ProviderError("transient", "malformed response body") from e
        out.latency_s = time.perf_counter() - start
        return out

    async def close(self) -> None:
        await self._client.close()
