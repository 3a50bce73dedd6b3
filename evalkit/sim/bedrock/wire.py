"""Amazon Bedrock's runtime routes for the simulated server: the Converse API and Claude's invoke route.

- Converse: `POST /model/{modelId}/converse` (docs.aws.amazon.com/bedrock/latest/APIReference/
  API_runtime_Converse.html, read 2026-11-27): content blocks `{"text"}` and `{"image": {"format",
  "source": {"bytes"}}}` (png, jpeg, gif, webp; at most 20 images of 3.75 MB), `system` blocks,
  `inferenceConfig`; the reply's `output.message.content`, `stopReason`, `usage` and `metrics`. The
  guardrail's verdict is a reply with `stopReason: guardrail_intervened`.
- Claude: `POST /model/{modelId}/invoke`, the Messages body without `model` and with
  `anthropic_version: bedrock-2023-05-31` (docs.aws.amazon.com/bedrock/latest/userguide/
  model-parameters-anthropic-claude-messages-request-response.html), answered as the Messages API does.

Every error is Bedrock's own, on both routes: the name in `x-amzn-ErrorType`, the words in `message`
(ThrottlingException 429 without a Retry-After, ServiceUnavailableException 503, InternalServerException
500, ValidationException 400 — also for a model id it does not serve, "The provided model identifier is
invalid."). Credentials are checked before a body is read (evalkit.sim.bedrock.auth).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from evalkit.sim.anthropic import AnthropicDialect, AnthropicRequest
from evalkit.sim.machinery.aws_shapes import aws_error
from evalkit.sim.machinery.tiers import header_tier, requested_tier, served_value
from evalkit.sim.machinery.wire import BadRequest, ParsedRequest, SimUsage

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState
    from evalkit.sim.thinking import Thought

CONVERSE_ROUTE = "/model/{model_id}/converse"
INVOKE_ROUTE = "/model/{model_id}/invoke"
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
FORMATS = ("png", "jpeg", "gif", "webp")
MAX_IMAGES = 20
MAX_IMAGE_BYTES = 3_750_000
_TOP_LEVEL = {"messages", "system", "inferenceConfig", "additionalModelRequestFields", "toolConfig",
              "guardrailConfig", "additionalModelResponseFieldPaths", "promptVariables", "requestMetadata",
              "performanceConfig", "serviceTier"}
_ERRORS = {"bad_request": (400, "ValidationException"), "not_found": (400, "ValidationException"),
           "rate_limit": (429, "ThrottlingException"), "server": (500, "InternalServerException"),
           "overloaded": (503, "ServiceUnavailableException"), "capacity": (503, "ServiceUnavailableException")}
TIER_HEADER = "X-Amzn-Bedrock-Service-Tier"  # InvokeModel's tier, asked and served (botocore's bedrock-runtime model)
_WORDS = {"rate_limit": "Too many requests, please wait before trying again.",
          "not_found": "The provided model identifier is invalid.",
          "overloaded": "Bedrock is unable to process your request."}
BLOCKED = "Sorry, the model cannot answer this question."  # a guardrail's default blocked-input message


def server_bedrock_error(status: int, kind: str, message: str, headers: dict[str, str] | None) -> web.Response:
    """Bedrock's error for the simulator's kinds; its throttling sends no Retry-After (the client backs off)."""
    status, name = _ERRORS.get(kind, (status, "InternalServerException"))
    kept = {k: v for k, v in (headers or {}).items() if k.lower() not in ("retry-after", "retry-after-ms")}
    return aws_error(status, name, _WORDS.get(kind, message), kept)


def _image(block: Any, where: str) -> str:
    """An image block as the data URL the server decodes; ValidationException for a bad one."""
    if not isinstance(block, dict) or block.get("format") not in FORMATS:
        raise BadRequest(f"{where}.format: must be one of {', '.join(FORMATS)}")
    source = block.get("source")
    data = source.get("bytes") if isinstance(source, dict) else None
    if not isinstance(data, str) or not data:
        raise BadRequest(f"{where}.source.bytes: base64 image bytes are required")
    size = len(data) * 3 // 4 - data[-2:].count("=")  # decoded by the server's image reader, which refuses non-base64
    if size > MAX_IMAGE_BYTES:
        raise BadRequest(f"{where}: image exceeds max size of {MAX_IMAGE_BYTES} bytes")
    return f"data:image/{block['format']};base64,{data}"


def parse_converse(body: Any, model: str) -> ParsedRequest:
    """A Converse body, checked as the API checks it."""
    if not isinstance(body, dict):
        raise BadRequest("Malformed input request: the body must be a JSON object")
    extra = sorted(set(body) - _TOP_LEVEL)
    if extra:
        raise BadRequest(f"Malformed input request: extraneous key [{extra[0]}] is not permitted")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("A conversation must start with a user message.")
    texts: list[str] = [b["text"] for b in body.get("system") or [] if isinstance(b, dict) and isinstance(b.get("text"), str)]
    user_text, images = "", []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise BadRequest(f"messages.{i}.role: must be user or assistant")
        content = msg.get("content")
        if not isinstance(content, list) or not content:
            raise BadRequest(f"messages.{i}.content: at least one content block is required")
        said: list[str] = []
        for j, block in enumerate(content):
            if isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"]:
                said.append(block["text"])
            elif isinstance(block, dict) and "image" in block:
                images.append(_image(block["image"], f"messages.{i}.content.{j}.image"))
            else:
                raise BadRequest(f"messages.{i}.content.{j}: unsupported or empty content block")
        texts += said
        if msg["role"] == "user":
            user_text = "\n".join(said)
    if len(images) > MAX_IMAGES:
        raise BadRequest(f"too many images: at most {MAX_IMAGES} per request")
    config = body.get("inferenceConfig") or {}
    max_tokens = config.get("maxTokens") if isinstance(config, dict) else None
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("inferenceConfig.maxTokens: must be a positive integer")
    stops = [s for s in config.get("stopSequences") or [] if isinstance(s, str) and s] if isinstance(config, dict) else []
    return ParsedRequest(model, user_text, "\n".join(texts), images, max_tokens, stops, None)


class ConverseDialect:
    """Bedrock's Converse API (module docstring)."""

    name = "bedrock-converse"
    routes = (CONVERSE_ROUTE,)
    overloaded_status = 503
    capacity_status = 503  # a flex request without room (evalkit.sim.machinery.tier_faults)

    def asked_tier(self, body: Any, request: web.Request) -> str | None:
        """Converse's ServiceTier, serviceTier.type in the body: priority | default | flex | reserved."""
        return requested_tier(body, "serviceTier.type")

    def parse(self, body: Any, request: web.Request) -> ParsedRequest:
        model = request.match_info.get("model_id", "")
        if isinstance(body, dict):
            body["model"] = model  # for the server's per-request counters (the path names the model)
            body = {k: v for k, v in body.items() if k != "model"}
        return parse_converse(body, model)

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage,
           thought: Thought | None = None) -> web.Response:
        stop = "max_tokens" if finish == "length" else "stop_sequence" if req.stop and finish == "stop" and \
            any(s in content for s in req.stop) else "end_turn"
        blocks: list[dict[str, Any]] = []
        if thought is not None:
            blocks.append({"reasoningContent": {"reasoningText": {"text": thought.text, "signature": "sim"}}})
        if content and req.answer_tool is not None:  # a forced tool (--structured): the answer is its input
            blocks.append({"toolUse": {"toolUseId": "tooluse_" + state.next_id().removeprefix("chatcmpl-"),
                                       "name": req.answer_tool, "input": json.loads(content)}})
            stop = "tool_use" if finish != "length" else stop
        elif content:
            blocks.append({"text": content})
        return web.json_response({
            "output": {"message": {"role": "assistant", "content": blocks}}, "stopReason": stop,
            "usage": {"inputTokens": usage.input_tokens - usage.cached_input_tokens,
                      "outputTokens": usage.output_tokens, "totalTokens": usage.input_tokens + usage.output_tokens,
                      **({"cacheReadInputTokens": usage.cached_input_tokens} if usage.cached_input_tokens else {})},
            "metrics": {"latencyMs": max(1, round(state.latency_s * 1000))},
            **({"serviceTier": {"type": served_value(req.service_tier)}} if req.service_tier is not None else {})})

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return server_bedrock_error(status, kind, message, headers)

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        """A guardrail's verdict: the blocked-input message, stopReason guardrail_intervened."""
        return web.json_response({
            "output": {"message": {"role": "assistant", "content": [{"text": BLOCKED}]}},
            "stopReason": "guardrail_intervened",
            "usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}, "metrics": {"latencyMs": 1}})

    def cached_tokens(self, state: SimState, body: Any, image_sizes: list[tuple[int, int]]) -> int:
        return 0  # prompt caching is opt-in through cachePoint blocks, which evalkit does not send


class BedrockClaudeDialect(AnthropicDialect):
    """Claude on Bedrock's invoke route (module docstring): Anthropic's replies, Bedrock's errors."""

    name = "bedrock-claude"
    routes = (INVOKE_ROUTE,)
    overloaded_status = 503
    capacity_status = 503

    def asked_tier(self, body: Any, request: web.Request) -> str | None:
        """InvokeModel names the tier in a header, and the tier served in the reply's header of the same name."""
        return header_tier(request, TIER_HEADER)

    def ok(self, state: SimState, req: Any, content: str, finish: str, usage: SimUsage,
           thought: Thought | None = None) -> web.Response:
        reply = super().ok(state, req, content, finish, usage, thought=thought)
        if req.service_tier is not None:  # the tier that served it, in the reply's header
            reply.headers[TIER_HEADER] = served_value(req.service_tier)
        return reply

    def parse(self, body: Any, request: web.Request) -> AnthropicRequest:
        if not isinstance(body, dict):
            raise BadRequest("Malformed input request: the body must be a JSON object")
        if "model" in body:
            raise BadRequest("Malformed input request: extraneous key [model] is not permitted")
        version = body.get("anthropic_version")
        if version != BEDROCK_ANTHROPIC_VERSION:
            raise BadRequest(f"Malformed input request: anthropic_version must be {BEDROCK_ANTHROPIC_VERSION!r}, "
                             f"not {version!r}")
        rest = {k: v for k, v in body.items() if k != "anthropic_version"}
        body["model"] = request.match_info.get("model_id", "")  # for the server's per-request counters
        return super().parse({**rest, "model": body["model"]}, _BodyVersioned(request))

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        return server_bedrock_error(status, kind, message, headers)


class _BodyVersioned:
    """The request as the Messages parser sees it on Bedrock: the body's anthropic_version governs (it takes
    sampling parameters), whatever `anthropic-version` header a client adds."""

    def __init__(self, request: web.Request) -> None:
        self.match_info = request.match_info
        self.headers: dict[str, str] = {}
