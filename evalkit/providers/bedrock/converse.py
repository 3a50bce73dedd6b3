"""`bedrock/<model id>` for every model but Claude: Amazon Bedrock's Converse API over one aiohttp session.

`POST {endpoint}/model/{modelId}/converse` (docs.aws.amazon.com/bedrock/latest/APIReference/
API_runtime_Converse.html and the Converse user guide, read 2026-11-27): messages of content blocks
(`{"text": …}`, `{"image": {"format": "png", "source": {"bytes": <base64>}}}`), `system` blocks,
`inferenceConfig` (maxTokens, temperature, topP, stopSequences) and the model's own fields in
`additionalModelRequestFields`. The reply's `output.message.content` holds text and `reasoningContent`
blocks; `stopReason` `guardrail_intervened` or `content_filtered` is the provider's refusal; `usage` counts
input (with `cacheReadInputTokens` / `cacheWriteInputTokens` apart, added back here) and output.

Each request is signed with SigV4 (evalkit.providers.bedrock.aws_sign) over the exact bytes and URL sent, or carries
a Bedrock API key (AWS_BEARER_TOKEN_BEDROCK) as a bearer token. Raw aiohttp, as for the chat-completions
servers, so the client is not what limits a run (bench/throughput.py measures it). Reasoning:
`--reasoning-effort` becomes Amazon Nova's `reasoningConfig` (maxReasoningEffort low|medium|high; none
switches it off); other Converse models take their own fields through `--extra additionalModelRequestFields=…`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
import yarl

from evalkit.core.errors import ProviderError, retry_after_from_headers
from evalkit.core.types import TOKEN_LIMIT_FINISHES, GenParams, ImagePart, Message, Response, Usage
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec, public_url
from evalkit.providers.bedrock.aws_sign import AwsCredentials, AwsRedactor, PrefixHasher, sign
from evalkit.providers.bedrock.errors import bedrock_error
from evalkit.providers.openai.compat import proxy_for
from evalkit.providers.registry import tiers_of
from evalkit.providers.structured import converse_fields, tool_text
from evalkit.providers.tiers import served_tier
from evalkit.providers.wire.connect import connect_cause
from evalkit.providers.wire.http_limits import (
    DEFAULT_MAX_RESPONSE_BYTES,
    is_redirect,
    read_capped,
    read_prefix,
    redirect_refused,
)
from evalkit.providers.wire.reply_json import (
    json_object,
    list_of,
    malformed,
    member,
    optional_text,
    token_count,
)

FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/webp": "webp", "image/gif": "gif"}
REFUSALS = ("guardrail_intervened", "content_filtered")
_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def reasoning_fields(params: GenParams) -> dict[str, Any]:
    """additionalModelRequestFields for the reasoning switch (Amazon Nova's reasoningConfig)."""
    if params.thinking_budget is not None:
        raise ProviderError("permanent", "--thinking-budget: bedrock/ Converse models take --reasoning-effort "
                                         "(Amazon Nova's reasoningConfig); a budget is Claude's (bedrock/…anthropic.…)")
    effort = params.reasoning_effort
    if effort is None:
        return {}
    if effort == "none":
        return {"reasoningConfig": {"type": "disabled"}}
    return {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": effort}}


def converse_body(messages: Sequence[Message], params: GenParams, images: Sequence[Any]) -> dict[str, Any]:
    """The Converse request (without the model, which is in the path). `images` are PreparedImages, or
    the text to put where each image's base64 goes (placeholders spliced later)."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    it = iter(images)
    for m in messages:
        if m.role == "system":
            if m.text():
                system.append({"text": m.text()})
            continue
        blocks: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ImagePart):
                img = next(it)
                data = img if isinstance(img, str) else img.b64()
                mime = img.mime if not isinstance(img, str) else "image/jpeg"
                blocks.append({"image": {"format": FORMATS.get(mime, "jpeg"), "source": {"bytes": data}}})
            elif p.text:  # an empty text block is refused
                blocks.append({"text": p.text})
        out.append({"role": m.role, "content": blocks})
    config: dict[str, Any] = {"maxTokens": params.max_tokens, "temperature": params.temperature}
    if params.top_p is not None:
        config["topP"] = params.top_p
    if params.stop:
        config["stopSequences"] = list(params.stop)
    body: dict[str, Any] = {"messages": out, "inferenceConfig": config}
    if system:
        body["system"] = system
    extra = params.extra_dict()
    fields = {**reasoning_fields(params), **(extra.pop("additionalModelRequestFields", None) or {})}
    if fields:
        body["additionalModelRequestFields"] = fields
    body.update(converse_fields(params))  # --structured: a forced tool (providers/structured.py)
    body.update(extra)  # anything else given with --extra goes as it is (guardrailConfig, …)
    return body


def response_from_converse(d: Any) -> Response:
    """A Converse reply -> Response; a guardrail or content filter stop is ProviderError("refused"), a reply
    without content blocks "empty" (unless cut off by the token limit)."""
    message = member(member(d, "output", "reply"), "message", "output")
    blocks = list_of(member(message, "content", "output.message"), "content blocks")
    texts: list[str] = []
    thoughts: list[str] = []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise malformed(f"content[{i}] is not an object")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        tool = block.get("toolUse")
        if isinstance(tool, dict):  # --structured's forced tool: its input is the answer
            texts.append(tool_text(tool.get("input")))
        reasoning = block.get("reasoningContent")
        if isinstance(reasoning, dict) and isinstance(reasoning.get("reasoningText"), dict):
            thoughts.append(optional_text(reasoning["reasoningText"].get("text")) or "")
    stop = optional_text(d.get("stopReason"))
    if stop in REFUSALS:
        raise ProviderError("refused", f"content refused (stopReason {stop})")
    if not blocks and stop not in TOKEN_LIMIT_FINISHES:
        raise ProviderError("empty", f"no content blocks (content: [], stopReason {stop or 'none'})")
    u = d.get("usage")
    read, written = token_count(u, "cacheReadInputTokens"), token_count(u, "cacheWriteInputTokens")
    usage = Usage(input_tokens=token_count(u, "inputTokens") + read + written,
                  output_tokens=token_count(u, "outputTokens"), cached_input_tokens=read)
    return Response(text="".join(texts), usage=usage, finish_reason=stop, reasoning="".join(thoughts) or None)


class ConverseProvider:
    """One aiohttp session for every request; each request signed on its own (credentials may refresh)."""

    def __init__(self, spec: ProviderSpec, *, region: str, credentials: AwsCredentials | None,
                 bearer: str | None = None, timeout_s: float = 120.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, connections: int = 256):
        self.spec = spec
        self.region = region
        self.max_response_bytes = max_response_bytes
        self._creds = credentials
        self._bearer = bearer
        base = spec.base_urls[0].rstrip("/")
        self._base = base
        self.url = f"{base}/model/{quote(spec.model, safe='')}/converse"
        self._yarl = yarl.URL(self.url, encoded=True)  # sent as signed: the `%3A` of `…v1%3A0` stays encoded
        self._redact: AwsRedactor = (credentials.redactor([bearer]) if credentials is not None
                                     else AwsRedactor([bearer]))
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._proxy = proxy_for(base)
        self._nonce = f"@evalkit-image-{uuid.uuid4().hex}-"
        self._hasher = PrefixHasher()
        self._tiers = tiers_of(spec.provider)  # --service-tier: the body's serviceTier

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    def describe_params(self, params: GenParams) -> dict:
        d = params.to_dict()
        d["seed"] = None  # the Converse API has no seed: never sent
        try:
            fields = reasoning_fields(params)
        except ProviderError as e:
            d["error"] = e.message
        else:
            if fields:
                d["additionalModelRequestFields"] = fields
        return d

    def body(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> dict:
        return converse_body(messages, params, images)

    def _encode(self, messages: Sequence[Message], params: GenParams,
                images: Sequence[PreparedImage]) -> tuple[bytes, int]:
        """The JSON body with each image's base64 spliced in as bytes (not JSON-encoded again), and where its
        head ends when it opens with an image (what queries on that image share: PrefixHasher), else 0."""
        marks = [f"{self._nonce}{i}@" for i in range(len(images))]
        body = converse_body(messages, params, marks)
        if self._tiers is not None and params.service_tier is not None:  # a delivery setting: not in the key
            body.update(self._tiers.body_fields(params.service_tier))
        for block, img in zip((b["image"] for m in body["messages"] for b in m["content"] if "image" in b),
                              images, strict=True):
            block["format"] = FORMATS.get(img.mime, "jpeg")
        payload = json.dumps(body, ensure_ascii=False).encode()
        head_end = 0
        for i, (mark, img) in enumerate(zip(marks, images, strict=True)):
            at = payload.find(mark.encode())
            text = img.b64().encode("ascii")  # a small image's text is kept
            payload = payload[:at] + text + payload[at + len(mark):]
            if i == 0 and payload[:at].count(b'"text"') == 0:  # nothing asked before the first image: a head
                head_end = at + len(text)  # shared by every query on it (PrefixHasher)
        return payload, head_end

    def _headers(self, payload: bytes, head_end: int) -> dict[str, str]:
        if self._bearer:
            return {**_HEADERS, "Authorization": f"Bearer {self._bearer}"}
        assert self._creds is not None
        digest = self._hasher.hexdigest(payload, head_end)
        return sign(self._creds.keys(), self.region, "POST", self.url, payload, _HEADERS, body_sha256=digest)

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        try:
            out = await self._post(*self._encode(messages, params, images), tier=params.service_tier)
        except ProviderError as e:
            raise self._redact.error(e) from e.__cause__
        out.text, out.reasoning = self._redact(out.text), self._redact.optional(out.reasoning)
        return out

    async def _post(self, payload: bytes, head_end: int, tier: str | None = None) -> Response:
        start = time.perf_counter()
        try:
            async with self._get_session().post(self._yarl, data=payload,
                                                headers=self._headers(payload, head_end), proxy=self._proxy,
                                                allow_redirects=False) as resp:
                if is_redirect(resp.status):
                    raise redirect_refused(resp.status, resp.headers.get("Location"), self.url)
                if resp.status != 200:
                    err = bedrock_error(resp.status, resp.headers, await read_prefix(resp), self.spec.model)
                    err.retry_after = retry_after_from_headers(resp.headers)
                    raise err
                body = await read_capped(resp, self.max_response_bytes)
        except asyncio.TimeoutError as e:
            raise ProviderError("timeout", "request timed out") from e
        except aiohttp.ClientPayloadError as e:
            raise ProviderError("transient", f"reply body unreadable: {type(e).__name__}") from e
        except aiohttp.ClientConnectorError as e:
            raise ProviderError("transient", f"{connect_cause(e)} ({public_url(self._base)})") from e
        except aiohttp.ClientError as e:
            raise ProviderError("transient", f"connection error: {type(e).__name__}") from e
        reply = json_object(body)
        out = response_from_converse(reply)
        out.served_tier = served_tier(self._tiers, tier, reply, None)  # the reply's serviceTier.type
        out.latency_s = time.perf_counter() - start
        out.served_by = self.spec.model
        return out

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
