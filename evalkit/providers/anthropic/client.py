"""`anthropic/<model>`: the Messages API through the official SDK's async client.

SDK retries are off (retries live once, in the runner). The 2.x SDKs speak API version
2026-10-21, which rejects temperature, top_p and top_k (even at their defaults) and no longer
has those arguments: they are sent only through an older SDK that still accepts them (API
2023-06-01). Prompt caching on Anthropic is explicit: nothing is cached unless a block
carries `cache_control`, so by default the last image of a request is marked, and every
query on the same image(s) reads the image prefix from the cache instead of paying again.

The SDK's HTTP client follows no redirect and caps replies (sdk_http); the reply's raw body is
checked by evalkit (reply_json) rather than trusted to the SDK's lenient models, and anything
the SDK raises becomes a classified ProviderError whose message never holds the key.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.sdk import import_sdk
from evalkit.core.types import TOKEN_LIMIT_FINISHES, GenParams, ImagePart, Message, Response, Usage
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.reasoning import budget_of, reasoning_problem
from evalkit.providers.registry import takes_json_output
from evalkit.providers.structured import (
    THINKING_REFUSED,
    anthropic_fields,
    json_output_fields,
    structured_problem,
    tool_text,
)
from evalkit.providers.tiers import ServiceTiers, served_tier
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES
from evalkit.providers.wire.rate_headers import rate_info
from evalkit.providers.wire.redact import Redactor, url_credentials
from evalkit.providers.wire.reply_json import (
    json_object,
    list_of,
    malformed,
    member,
    optional_text,
    snapshot,
    string_of,
    token_count,
)
from evalkit.providers.wire.sdk_errors import sdk_error
from evalkit.providers.wire.sdk_http import guarded_sdk_client

EPHEMERAL = {"type": "ephemeral"}


def anthropic_thinking(params: GenParams) -> tuple[dict[str, Any] | None, int]:
    """(the `thinking` parameter or None, the max_tokens to send). max_tokens must exceed the budget:
    when it does not, it is raised to budget + max_tokens so the answer keeps its own room. A budget
    Anthropic's record refuses is refused here too (Claude on Bedrock and Vertex AI included)."""
    message = reasoning_problem("anthropic", "", params.reasoning_effort, params.thinking_budget)
    if message is not None:
        raise ProviderError("permanent", message)
    budget = budget_of(params)
    if not budget:
        return None, params.max_tokens
    max_tokens = params.max_tokens if params.max_tokens > budget else budget + params.max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


def thinking_enabled(params: GenParams) -> bool:
    """Extended thinking asked for, through `extra` or the reasoning switch (the API then requires the
    default temperature)."""
    t = params.extra_dict().get("thinking")
    if t is None:
        try:
            t = anthropic_thinking(params)[0]
        except ProviderError:  # a budget the API refuses: reported where the request is built
            return False
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
                 cache_marker: bool = True, sampling: bool = False, json_output: bool = False) -> dict[str, Any]:
    """Keyword arguments for `messages.create`; unknown extras go to `extra_body` verbatim.

    `--structured` is `output_config.format` for a model with structured outputs (`json_output`: its record's
    pattern), sent in `extra_body` so any SDK version carries it; else a forced tool.

    seed is dropped (the API has none). temperature and top_p go only where the API takes them
    (`sampling`), and temperature never with thinking on (only the default is allowed then).
    """
    system, msgs = anthropic_messages(messages, images, cache_marker=cache_marker)
    thinking, max_tokens = anthropic_thinking(params)  # --reasoning-effort / --thinking-budget
    args: dict[str, Any] = {"model": model, "messages": msgs, "max_tokens": max_tokens}
    if system is not None:
        args["system"] = system
    if sampling and not thinking_enabled(params):
        args["temperature"] = params.temperature
    if sampling and params.top_p is not None:
        args["top_p"] = params.top_p
    if params.stop:
        args["stop_sequences"] = list(params.stop)
    extra = params.extra_dict()
    if thinking is not None:
        args["thinking"] = thinking
    if "thinking" in extra:  # --extra wins
        args["thinking"] = extra.pop("thinking")
    if params.answer_schema is not None and json_output:  # --structured as JSON text: thinking allowed
        extra = {**json_output_fields(params), **extra}  # --extra wins
    elif params.answer_schema is not None:  # --structured: a forced tool, which the API refuses with thinking on
        if "thinking" in args and structured_problem(True, True, None, None, {"thinking": args["thinking"]}):
            raise ProviderError("permanent", THINKING_REFUSED)
        args.update(anthropic_fields(params))
    if extra:
        args["extra_body"] = extra
    return args


def response_from_anthropic(d: Any) -> Response:
    """Messages JSON -> Response; a refusal raises ProviderError("refused"), a body without usable
    content blocks ProviderError("transient", "malformed reply: ..."), and `content: []` (the model
    ended its turn without a block, text or otherwise) ProviderError("empty"): no answer to keep, asked
    again like an empty reply. Cut off by the token limit before any block, it is final (a cut-off).

    Anthropic's input_tokens counts only what follows the last cache breakpoint, so the total
    input is that plus the cache reads and writes.
    """
    blocks = list_of(member(d, "content", "reply"), "content blocks")
    texts: list[str] = []
    thoughts: list[str] = []
    for i, block in enumerate(blocks):
        kind = member(block, "type", f"content[{i}]")
        if kind == "text":
            texts.append(string_of(block.get("text"), f"content[{i}].text"))
        elif kind == "thinking":
            thoughts.append(optional_text(block.get("thinking")) or "")
        elif kind == "tool_use":  # --structured's forced tool: its input is the answer (providers/structured.py)
            texts.append(tool_text(block.get("input")))
    stop_reason = optional_text(d.get("stop_reason"))
    if stop_reason == "refusal":
        raise ProviderError("refused", "content refused (stop_reason refusal)")
    if not blocks and stop_reason not in TOKEN_LIMIT_FINISHES:
        raise ProviderError("empty", f"no content blocks (content: [], stop_reason {stop_reason or 'none'})")
    u = d.get("usage")
    read = token_count(u, "cache_read_input_tokens")
    written = token_count(u, "cache_creation_input_tokens")
    usage = Usage(input_tokens=token_count(u, "input_tokens") + read + written,
                  output_tokens=token_count(u, "output_tokens"), cached_input_tokens=read)
    return Response(text="".join(texts), usage=usage, finish_reason=stop_reason, reasoning="".join(thoughts) or None,
                    served_by=snapshot(d.get("model")))


class AnthropicProvider:
    """One AsyncAnthropic client (aiohttp transport when the SDK ships it) shared by all requests."""

    body_fields: dict[str, Any] = {}  # noqa: RUF012 - read only: fields every request body carries
    wire_tiers: ServiceTiers | None = None  # a platform that sells service tiers: how its wire names them

    def __init__(self, spec: ProviderSpec, *, api_key: str, timeout_s: float = 120.0, cache_marker: bool = True,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        anthropic = import_sdk("anthropic", spec.label)  # lazy: only when this provider is used

        self._anthropic = anthropic
        self.spec = spec
        self.cache_marker = cache_marker
        self.max_response_bytes = max_response_bytes
        self._redact = Redactor([api_key, *(s for u in spec.base_urls for s in url_credentials(u))])
        kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": timeout_s,
                                  "http_client": guarded_sdk_client(anthropic, timeout_s, max_response_bytes)}
        self._client = self._make_client(anthropic, kwargs)
        self.json_output = takes_json_output(spec.provider, spec.model)  # --structured as output_config.format
        # SDKs before 1.0 (API 2023-06-01) still take sampling parameters; 2.x rejects them
        self.sampling = "temperature" in inspect.signature(self._client.messages.create).parameters

    def _make_client(self, anthropic: Any, kwargs: dict[str, Any]) -> Any:
        """The Anthropic API's client (Vertex AI's: providers/vertex/client.py)."""
        if self.spec.base_urls:
            kwargs["base_url"] = self.spec.base_urls[0]
        return anthropic.AsyncAnthropic(**kwargs)

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
        try:
            thinking, max_tokens = anthropic_thinking(params)
        except ProviderError as e:
            d["error"] = e.message
        else:
            if thinking is not None:
                d["thinking"] = thinking
            if max_tokens != params.max_tokens:
                d["max_tokens"] = max_tokens
                d["max_tokens_note"] = (f"raised from {params.max_tokens} to thinking budget "
                                        f"{thinking and thinking['budget_tokens']} + {params.max_tokens}")
        d["cache_control"] = "ephemeral on the last image" if self.cache_marker else None
        return d

    def body(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> dict:
        """The request as JSON (extra_body merged in, as the SDK sends it): what a batch request's params are."""
        args = request_args(self.spec.model, messages, params, images, cache_marker=self.cache_marker,
                            sampling=self.sampling, json_output=self.json_output)
        extra = args.pop("extra_body", {})
        return {**args, **extra}

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        args = request_args(self.spec.model, messages, params, images, cache_marker=self.cache_marker,
                            sampling=self.sampling, json_output=self.json_output)
        if self.body_fields:  # a platform's own body fields (Vertex AI's anthropic_version)
            args["extra_body"] = {**self.body_fields, **args.get("extra_body", {})}
        tier_headers = self.wire_tiers.headers(params.service_tier) if self.wire_tiers is not None else {}
        if tier_headers:  # a platform's service tier, named in a header (Bedrock's InvokeModel)
            args["extra_headers"] = {**args.get("extra_headers", {}), **tier_headers}
        start = time.perf_counter()
        try:
            raw = await self._client.messages.with_raw_response.create(**args)
            body = raw.http_response.content
            limits = rate_info(raw.http_response.headers)
        except Exception as e:  # whatever the SDK raises while sending, reading or parsing: classified
            err = sdk_error(self._anthropic, e) or malformed(f"unreadable ({type(e).__name__})")
            raise self._redact.error(err) from e
        try:
            out = response_from_anthropic(json_object(body))
        except ProviderError as e:
            self._redact.error(e)
            raise
        out.text, out.reasoning = self._redact(out.text), self._redact.optional(out.reasoning)
        out.latency_s = time.perf_counter() - start
        out.limits = limits
        if self.wire_tiers is not None:  # the tier that served it, where the platform's wire says
            out.served_tier = served_tier(self.wire_tiers, params.service_tier, None, raw.http_response.headers)
        return out

    async def close(self) -> None:
        await self._client.close()


def anthropic_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                       max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> AnthropicProvider:
    """The client its record names (evalkit.providers.registry): one signature for every provider."""
    del env  # the key is read by the caller; the SDK reads no other variable evalkit passes on
    return AnthropicProvider(spec, api_key=api_key or "", timeout_s=timeout_s, max_response_bytes=max_response_bytes)
