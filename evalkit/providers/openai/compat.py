"""`vllm/<model>`, `openai-compatible/<model>`, `openai-compatible/<service>/<model>` (and `openai/`, see
openai_api): chat completions over one pooled aiohttp session.

Raw aiohttp rather than an SDK because local servers are fast and the client must not be
the bottleneck (bench/throughput.py measures it against a bare aiohttp loop). Replies are read
within the size cap and checked before they become a Response (http_limits, reply_json);
redirects are not followed; the key never leaves in a message (redact).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from evalkit.core.errors import (
    EvalkitError,
    ProviderError,
    classify_status,
    retry_after_from_headers,
    server_reason,
)
from evalkit.core.types import GenParams, Message, Response
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.api_route import RESPONSES, route_hint
from evalkit.providers.base import ProviderSpec, public_url
from evalkit.providers.openai.format import chat_body, openai_messages, response_from_openai
from evalkit.providers.openai.responses import ROUTE as RESPONSES_ROUTE
from evalkit.providers.openai.responses import response_from_responses, responses_body
from evalkit.providers.openai.service import service_reasoning
from evalkit.providers.reasoning import chat_fields
from evalkit.providers.registry import tiers_of
from evalkit.providers.replicas import Replica, ReplicaPool
from evalkit.providers.tiers import served_tier
from evalkit.providers.wire.connect import connect_cause
from evalkit.providers.wire.http_limits import (
    DEFAULT_MAX_RESPONSE_BYTES,
    is_redirect,
    read_capped,
    read_prefix,
    redirect_refused,
)
from evalkit.providers.wire.rate_headers import rate_info
from evalkit.providers.wire.redact import Redactor, url_credentials
from evalkit.providers.wire.reply_json import json_object

if TYPE_CHECKING:  # imported with the first request: a run answered from the cache never loads it (0.2 s)
    import aiohttp


def normalise_base_url(url: str) -> str:
    """`http://host:8000` and `http://host:8000/v1/` both mean `http://host:8000/v1`."""
    url = url.rstrip("/")
    path = url.split("://", 1)[-1].partition("/")[2]
    return url if path else url + "/v1"


def proxy_for(url: str) -> str | None:
    """The proxy that HTTPS_PROXY / HTTP_PROXY name for `url`, unless NO_PROXY exempts its host.
    Read once per provider: aiohttp's trust_env would also look up ~/.netrc in a thread on every request."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    proxy = getproxies().get(parts.scheme)
    return None if not proxy or proxy_bypass(parts.hostname or "") else proxy


def error_kind(status: int, body: str | bytes) -> str:
    """The kind of a chat-completions error: by status, except where the body says more — an account out of
    credits (OpenRouter's 402) or quota (OpenAI's 429 `insufficient_quota`) is "exhausted", and Azure's
    prompt filter (400, code `content_filter`) is the provider's refusal, not a bad request. Pure."""
    if status == 402:
        return "exhausted"
    if status in (400, 429):
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            parsed = None
        error = parsed.get("error") if isinstance(parsed, dict) else None
        codes = {error.get("code"), error.get("type")} if isinstance(error, dict) else set()
        if status == 429 and "insufficient_quota" in codes:
            return "exhausted"
        if status == 400 and "content_filter" in codes:
            return "refused"
    return classify_status(status)


def error_message(status: int, body: str | bytes) -> str:
    """A one-line message from an error body (OpenAI-style JSON; older vLLM releases put the message at the
    top level; or text), trimmed."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(body)
        err = parsed.get("error")
        msg = err.get("message") if isinstance(err, dict) else str(err) if err is not None else parsed["message"]
    except (ValueError, AttributeError, KeyError):
        msg = body
    return f"HTTP {status}: {server_reason(msg)}"


class OpenAICompatProvider:
    """One aiohttp session shared by all requests, spread over the replicas of the model."""

    def __init__(self, spec: ProviderSpec, *, api_key: str | None = None, timeout_s: float = 120.0,
                 connections: int = 256, urls: Sequence[str] | None = None, max_tokens_field: str = "max_tokens",
                 send_temperature: bool = True, headers: Mapping[str, str] | None = None,
                 env_proxy: bool = False, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 route: str = "/chat/completions", key_header: str | None = None, reports_cost: bool = False,
                 secrets: Sequence[str] = (), responses_urls: Mapping[str, str] | None = None):
        """`route`: the chat call's path (and query) after each base URL; `key_header`: the header carrying
        the key (None: `Authorization: Bearer`); `reports_cost`: replies say what they cost (usage.cost);
        `secrets`: more values to redact from every message (a token carried in `headers`);
        `responses_urls`: each base URL's Responses API URL (None: the base + /responses)."""
        self.spec = spec
        self.max_response_bytes = max_response_bytes
        self.pool = ReplicaPool([normalise_base_url(u) for u in (urls or spec.base_urls)])
        self._max_tokens_field = max_tokens_field
        self._send_temperature = send_temperature
        self._route = route
        self._responses_urls = dict(responses_urls or {})
        self._reports_cost = reports_cost
        self._tiers = tiers_of(spec.provider)  # --service-tier: its record says how
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers.update({key_header: api_key} if key_header else {"Authorization": f"Bearer {api_key}"})
        self._redact = Redactor([api_key, *secrets,
                                 *(s for r in self.pool.replicas for s in url_credentials(r.url))])
        self._timeout_s = timeout_s
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._no_switch: dict | None = None  # the reasoning fields of a request without a switch (_reasoning)
        self._nonce = f"@evalkit-image-{uuid.uuid4().hex}-"
        self._proxies = {r.url: proxy_for(r.url) for r in self.pool.replicas} if env_proxy else {}

    def _get_session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(
                total=self._timeout_s), headers=self._headers)
        return self._session

    def describe_params(self, params: GenParams) -> dict:
        d = params.to_dict()
        if not self._send_temperature:
            d["temperature"] = None
        try:
            d.update(self._reasoning(params))  # as sent (gpt-5: none -> minimal)
        except ProviderError as e:
            d["error"] = e.message
        return d

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        import aiohttp

        payload = self._encode(messages, params, images)
        tier = params.service_tier
        tier_headers = self._tiers.headers(tier) if self._tiers is not None else {}
        tried: list[Replica] = []
        while True:
            replica = self.pool.pick(exclude=tried)
            tried.append(replica)
            try:
                with self.pool.lease(replica):
                    out = await self._post(replica.url, payload, tier, tier_headers, params)
            except ProviderError as e:
                replica.errors += 1
                replica.rate_limited += e.kind == "rate_limit"
                unreachable = isinstance(e.__cause__, aiohttp.ClientConnectorError)
                if e.kind in ("transient", "timeout") or unreachable:
                    self.pool.failed(replica, unreachable=unreachable)
                if unreachable and len(tried) < len(self.pool):
                    continue  # nothing was delivered: another replica takes it within this attempt
                self._redact.error(e)
                raise
            self.pool.succeeded(replica)
            out.text, out.reasoning = self._redact(out.text), self._redact.optional(out.reasoning)
            return out

    async def _post(self, base: str, payload: bytes, tier: str | None = None,
                    tier_headers: Mapping[str, str] | None = None, params: GenParams | None = None) -> Response:
        import aiohttp

        responses = params is not None and params.api == RESPONSES  # the Responses API (issue 47)
        url = self._responses_urls.get(base, base + RESPONSES_ROUTE) if responses else base + self._route
        start = time.perf_counter()
        try:
            async with self._get_session().post(url, data=payload, proxy=self._proxies.get(base),
                                                headers=tier_headers or None, allow_redirects=False) as resp:
                if is_redirect(resp.status):
                    raise redirect_refused(resp.status, resp.headers.get("Location"), url)
                if resp.status != 200:
                    text = await read_prefix(resp)
                    raise ProviderError(error_kind(resp.status, text), route_hint(error_message(resp.status, text)),
                                        status=resp.status, retry_after=retry_after_from_headers(resp.headers),
                                        limits=rate_info(resp.headers))
                limits = rate_info(resp.headers)
                body = await read_capped(resp, self.max_response_bytes)
        except asyncio.TimeoutError as e:
            raise ProviderError("timeout", "request timed out") from e
        except aiohttp.ClientPayloadError as e:  # cut short, or a body that does not decompress
            raise ProviderError("transient", f"reply body unreadable: {type(e).__name__}") from e
        except aiohttp.ClientConnectorError as e:  # nothing was delivered
            raise ProviderError("transient", f"{connect_cause(e)} ({public_url(base)})") from e
        except aiohttp.ClientError as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        except ValueError as e:  # aiohttp refused to send it (a key and URL credentials both given)
            raise ProviderError("permanent", f"request not sent: {e}") from e
        reply = json_object(body)
        out = response_from_responses(reply, params.stop) if responses and params is not None else \
            response_from_openai(reply, reports_cost=self._reports_cost)
        out.latency_s = time.perf_counter() - start
        out.limits = limits
        out.served_tier = served_tier(self._tiers, tier, reply, resp.headers)
        return out

    def _reasoning(self, params: GenParams) -> dict:
        """The reasoning switch's body fields: the provider's (which also refuses what it cannot take), or
        OpenAI's `reasoning_effort` for a service (`openai-compatible/<service>/<model>`). Without a switch
        they are the same for every request: worked out once (they were a record look-up per request)."""
        plain = params.reasoning_effort is None and params.thinking_budget is None
        if plain and self._no_switch is not None:
            return self._no_switch
        fields = chat_fields(self.spec.provider, self.spec.model, params)
        fields = service_reasoning(params) if self.spec.service is not None else fields
        if plain:
            self._no_switch = fields
        return fields

    def body(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> dict:
        """The request body as a dict, images inline: what a batch line carries (the same JSON as _encode's)."""
        if params.api == RESPONSES:
            return responses_body(self.spec.model, messages, images, params, send_temperature=self._send_temperature,
                                  reasoning=self._reasoning(params))
        return chat_body(self.spec.model, openai_messages(messages, images, params.detail), params,
                         max_tokens_field=self._max_tokens_field, send_temperature=self._send_temperature,
                         reasoning=self._reasoning(params))

    def _encode(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> bytes:
        """JSON body with the data URIs spliced in as bytes: JSON-encoding a 40 KB base64 string
        on every request was the largest cost of the client (base64 needs no JSON escaping)."""
        marks = [f"{self._nonce}{i}@" for i in range(len(images))]
        if params.api == RESPONSES:
            body = responses_body(self.spec.model, messages, marks, params, send_temperature=self._send_temperature,
                                  reasoning=self._reasoning(params))
        else:
            body = chat_body(self.spec.model, openai_messages(messages, marks, params.detail), params,
                             max_tokens_field=self._max_tokens_field, send_temperature=self._send_temperature,
                             reasoning=self._reasoning(params))
        if self._tiers is not None and params.service_tier is not None:  # a delivery setting: not in the key
            body = {**self._tiers.body_fields(params.service_tier), **body}
        payload = json.dumps(body, ensure_ascii=False).encode()
        for mark, img in zip(marks, images, strict=True):
            payload = payload.replace(mark.encode(), img.data_uri_bytes(), 1)
        return payload

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def served_models(base_url: str, api_key: str | None = None, timeout_s: float = 10.0) -> list[str]:
    """Model names listed by an OpenAI-compatible server's /v1/models (for `vllm/auto`)."""
    import aiohttp

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = normalise_base_url(base_url) + "/models"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session, \
                session.get(url, headers=headers, allow_redirects=False) as resp:
            if resp.status != 200:
                raise EvalkitError(f"{url}: HTTP {resp.status} while listing served models")
            data = json_object(await read_capped(resp, DEFAULT_MAX_RESPONSE_BYTES))
    except ProviderError as e:
        raise EvalkitError(f"cannot list served models at {url}: {e.message}") from e
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
        raise EvalkitError(f"cannot list served models at {url}: {type(e).__name__}") from e
    listed = data.get("data")
    return [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)] \
        if isinstance(listed, list) else []


def compat_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> OpenAICompatProvider:
    """The client its record names (evalkit.providers.registry) for vllm/ and openai-compatible/."""
    del env  # the key is read by the caller
    return OpenAICompatProvider(spec, api_key=api_key, timeout_s=timeout_s, max_response_bytes=max_response_bytes)
