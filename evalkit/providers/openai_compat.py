"""`vllm/<model>` and `openai-compatible/<model>`: chat completions over one pooled aiohttp session.

Raw aiohttp rather than an SDK because local servers are fast and the client must not be
the bottleneck (bench/throughput.py measures it against a bare aiohttp loop).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import aiohttp

from ..errors import ProviderError, classify_status, parse_retry_after
from ..images import PreparedImage
from ..types import GenParams, Message, Response
from .base import ProviderSpec
from .openai_format import chat_body, openai_messages, response_from_openai


def normalise_base_url(url: str) -> str:
    """`http://host:8000` and `http://host:8000/v1/` both mean `http://host:8000/v1`."""
    url = url.rstrip("/")
    path = url.split("://", 1)[-1].partition("/")[2]
    return url if path else url + "/v1"


def retry_after_from_headers(headers: Any) -> float | None:
    ms = headers.get("retry-after-ms") if headers is not None else None
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after") if headers is not None else None)


def error_message(status: int, body: str) -> str:
    """A one-line message from an error body (OpenAI-style JSON or text), trimmed."""
    try:
        err = json.loads(body).get("error")
        msg = err.get("message") if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        msg = body
    return f"HTTP {status}: {' '.join(str(msg).split())[:300]}"


class OpenAICompatProvider:
    """One aiohttp session shared by all requests; the first base URL is used (replicas: issue 3)."""

    def __init__(self, spec: ProviderSpec, *, api_key: str | None = None, timeout_s: float = 120.0,
                 connections: int = 256):
        self.spec = spec
        self._url = normalise_base_url(spec.base_urls[0]) + "/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._nonce = f"@evalkit-image-{uuid.uuid4().hex}-"

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout,
                                                  headers=self._headers)
        return self._session

    def describe_params(self, params: GenParams) -> dict:
        return params.to_dict()

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        payload = self._encode(messages, params, images)
        start = time.perf_counter()
        try:
            async with self._get_session().post(self._url, data=payload) as resp:
                text = await resp.text()
                if resp.status != 200:
                    kind = classify_status(resp.status)
                    raise ProviderError(kind, error_message(resp.status, text), status=resp.status,
                                        retry_after=retry_after_from_headers(resp.headers))
        except asyncio.TimeoutError as e:
            raise ProviderError("timeout", "request timed out") from e
        except aiohttp.ClientError as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        try:
            out = response_from_openai(json.loads(text))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise ProviderError("transient", "malformed response body") from e
        out.latency_s = time.perf_counter() - start
        return out

    def _encode(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> bytes:
        """JSON body with the data URIs spliced in as bytes: JSON-encoding a 40 KB base64 string
        on every request was the largest cost of the client (base64 needs no JSON escaping)."""
        marks = [f"{self._nonce}{i}@" for i in range(len(images))]
        body = chat_body(self.spec.model, openai_messages(messages, marks), params)
        payload = json.dumps(body, ensure_ascii=False).encode()
        for mark, img in zip(marks, images, strict=True):
            payload = payload.replace(mark.encode(), img.data_uri().encode("ascii"), 1)
        return payload

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
