"""The Gemini API (`POST /{v1,v1beta,v1alpha}/models/{model}:generateContent`) for the simulated server.

The google-genai SDK posts to `{base_url}/{api_version}/models/{model}:generateContent` (3.x
defaults to `v1`, the REST docs use `v1beta`), so every version is routed. The model name comes
from the URL, not the body. What the real API does and the simulator copies:

- Request: `contents` (role user/model, parts with `text` or `inlineData` — the SDK writes
  `inlineData: {mime_type, data}`, REST clients `mimeType`; both are read), `systemInstruction`,
  `generationConfig` (maxOutputTokens, stopSequences (at most 5), temperature 0..2, topP,
  responseModalities, thinkingConfig). Malformed fields are 400 INVALID_ARGUMENT.
- Reply: `candidates[0].content.parts`, `finishReason` STOP or MAX_TOKENS (a stop sequence
  ends with STOP, as in the real API), `usageMetadata` with `cachedContentTokenCount` only when
  a prefix was cached (the server's automatic prefix-cache rule, see evalkit.sim.machinery.prompt_cache)
  and `thoughtsTokenCount` only when thoughts were returned (`includeThoughts` with a non-zero
  budget: one short thought part, flagged `thought: true`, before the answer). With `--think-tokens`
  the model really thinks (evalkit.sim.thinking): thoughts are always counted, returned only with
  `includeThoughts`, and a reply cut off while thinking ends with MAX_TOKENS and no answer part.
- Errors: `{"error": {"code", "message", "status", "details"}}`; a 429 carries
  `google.rpc.RetryInfo.retryDelay` (e.g. "0.05s") and no Retry-After header, as the real API.
  "Overloaded" is 503 UNAVAILABLE. A refusal is a prompt block: `promptFeedback.blockReason`
  SAFETY and no candidates.
- Image output: with "IMAGE" in `responseModalities` and an image in the request, the reply
  carries an `inlineData` PNG, `simulated_edit` of the first input image, after a short text
  part (no text part when only IMAGE was asked for). Output image tokens: 1290, Gemini's figure.

The server counts requests by the body's `model` and `messages` (evalkit.sim.machinery.counters), which a
Gemini body lacks, so `parse` adds both: the URL's model and an OpenAI-shaped view of the
prompt. The same view feeds the prefix cache.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from PIL import Image, ImageOps

from evalkit.sim.machinery.prompt_cache import prompt_chunks
from evalkit.sim.machinery.wire import BadRequest, ParsedRequest, SimUsage
from evalkit.sim.model import server_estimate_tokens

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState
    from evalkit.sim.thinking import Thought

ROUTE = r"/{version:v1|v1beta|v1alpha}/models/{model:[^/:]+}:generateContent"
IMAGE_OUTPUT_TOKENS = 1290  # what Gemini bills for one generated image up to 1024x1024
EDIT_TEXT = "Here is the edited image."
THOUGHT_TEXT = "Looking at the image and weighing the options."
MAX_STOP_SEQUENCES = 5
_STATUS = {"bad_request": "INVALID_ARGUMENT", "not_found": "NOT_FOUND", "rate_limit": "RESOURCE_EXHAUSTED",
           "server": "INTERNAL", "overloaded": "UNAVAILABLE", "capacity": "UNAVAILABLE"}
TIER_HEADER = "x-gemini-service-tier"  # the tier that served a reply: the only place Gemini says it


def simulated_edit(image_bytes: bytes) -> bytes:
    """The simulator's deterministic "edit": a false-colour map of the first input image, as PNG.

    EXIF orientation is applied, the picture is reduced to luminance and mapped onto a fixed
    ramp (black -> (10, 20, 90), mid grey -> (60, 160, 80), white -> (250, 230, 120)), like an
    infrared-to-RGB edit. Pure, so a test can predict the output pixel for pixel, and shared
    with the OpenAI image-edit route (evalkit.sim.openai.edits).
    """
    with Image.open(io.BytesIO(image_bytes)) as img:
        gray = ImageOps.grayscale(ImageOps.exif_transpose(img))
    out = ImageOps.colorize(gray, black=(10, 20, 90), white=(250, 230, 120), mid=(60, 160, 80))
    buf = io.BytesIO()
    out.save(buf, "PNG")
    return buf.getvalue()


@dataclass(frozen=True)
class GeminiRequest(ParsedRequest):
    """A parsed generateContent body plus what shaping the reply needs."""

    modalities: tuple[str, ...] = ("TEXT",)
    thoughts: bool = False


def _pick(d: dict[str, Any], camel: str, snake: str) -> Any:
    """A field under its JSON (camelCase) or proto (snake_case) name; the API accepts both."""
    return d[camel] if camel in d else d.get(snake)


def _number(cfg: dict[str, Any], camel: str, snake: str, low: float, high: float) -> None:
    value = _pick(cfg, camel, snake)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"generation_config.{snake} must be a number in [{low:g}, {high:g}]")


def _parts(content: Any, where: str) -> tuple[list[str], list[str]]:
    """(texts, image data URLs) of one Content, validating its shape."""
    if not isinstance(content, dict):
        raise BadRequest(f"{where} must be a Content object")
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise BadRequest(f"{where}.parts must be a non-empty list")
    texts: list[str] = []
    images: list[str] = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise BadRequest(f"{where}.parts[{j}] must be an object")
        blob = _pick(part, "inlineData", "inline_data")
        if isinstance(part.get("text"), str):
            if not part.get("thought"):
                texts.append(part["text"])
        elif isinstance(blob, dict):
            mime, data = _pick(blob, "mimeType", "mime_type"), blob.get("data")
            if not isinstance(mime, str) or not isinstance(data, str) or not data:
                raise BadRequest(f"{where}.parts[{j}].inline_data needs mime_type and base64 data")
            if not mime.startswith("image/"):
                raise BadRequest(f"{where}.parts[{j}]: unsupported MIME type {mime!r} in evalkit sim")
            images.append(f"data:{mime};base64,{_standard_b64(data)}")
        else:
            raise BadRequest(f"{where}.parts[{j}]: only text and inline_data parts are supported by evalkit sim")
    return texts, images


def _standard_b64(data: str) -> str:
    """Standard base64 from either alphabet: the SDK (pydantic) sends URL-safe base64, which
    proto JSON accepts as the real API does, while the server's image decoder reads standard."""
    data = data.replace("-", "+").replace("_", "/")
    return data + "=" * (-len(data) % 4)


def _openai_view(role: str, texts: list[str], images: list[str]) -> dict[str, Any]:
    content = [{"type": "image_url", "image_url": {"url": u}} for u in images]
    content += [{"type": "text", "text": t} for t in texts]
    return {"role": role, "content": content}


class GeminiDialect:
    """The Gemini API's generateContent, with image output for image editing (module docstring)."""

    name = "gemini"
    routes = (ROUTE,)
    overloaded_status = 503
    capacity_status = 503  # a flex request shed: UNAVAILABLE (evalkit.sim.machinery.tier_faults)

    def asked_tier(self, body: Any, request: web.Request) -> str | None:
        """The tier a generateContent body asks for (`serviceTier`, the SDK's spelling, or `service_tier`, REST
        clients', any case); None for none or UNSPECIFIED (the default: standard)."""
        value = _pick(body, "serviceTier", "service_tier") if isinstance(body, dict) else None
        tier = value.lower() if isinstance(value, str) else None
        return None if tier in (None, "", "unspecified") else tier

    @staticmethod
    def tier_headers(req: ParsedRequest) -> dict[str, str] | None:
        """The reply's `x-gemini-service-tier` where the request named a tier: the tier that served it (a
        priority request over its limit says standard: ai.google.dev/gemini-api/docs/priority-inference)."""
        return None if req.service_tier is None else {TIER_HEADER: req.service_tier}

    @staticmethod
    def tier_usage(req: ParsedRequest) -> dict[str, str]:
        """What usageMetadata says of the tier served: nothing on the Gemini API (its header says it)."""
        return {}

    def parse(self, body: Any, request: web.Request) -> GeminiRequest:
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        model = request.match_info.get("model", "")
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise BadRequest("contents is not specified")
        view: list[dict[str, Any]] = []
        all_texts: list[str] = []
        system = _pick(body, "systemInstruction", "system_instruction")
        if system is not None:
            texts, images = _parts(system, "system_instruction")
            if images:
                raise BadRequest("system_instruction may only contain text parts")
            all_texts += texts
            view.append(_openai_view("system", texts, []))
        user_text = ""
        image_urls: list[str] = []
        for i, content in enumerate(contents):
            role = content.get("role", "user") if isinstance(content, dict) else None
            if role not in ("user", "model"):
                raise BadRequest(f"contents[{i}].role must be 'user' or 'model'")
            texts, images = _parts(content, f"contents[{i}]")
            all_texts += texts
            view.append(_openai_view("assistant" if role == "model" else "user", texts, images))
            if role == "user":
                user_text = "\n".join(texts)
                image_urls += images
        cfg = _pick(body, "generationConfig", "generation_config") or {}
        if not isinstance(cfg, dict):
            raise BadRequest("generation_config must be an object")
        max_tokens = _pick(cfg, "maxOutputTokens", "max_output_tokens")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise BadRequest("generation_config.max_output_tokens must be a positive integer")
        _number(cfg, "temperature", "temperature", 0.0, 2.0)
        _number(cfg, "topP", "top_p", 0.0, 1.0)
        stop = _pick(cfg, "stopSequences", "stop_sequences") or []
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest("generation_config.stop_sequences must be a list of strings")
        if len(stop) > MAX_STOP_SEQUENCES:
            raise BadRequest(f"generation_config.stop_sequences: at most {MAX_STOP_SEQUENCES} are allowed")
        modalities = _pick(cfg, "responseModalities", "response_modalities") or ["TEXT"]
        if not isinstance(modalities, list) or any(m not in ("TEXT", "IMAGE", "AUDIO") for m in modalities):
            raise BadRequest("generation_config.response_modalities must list TEXT, IMAGE or AUDIO")
        thinking = _pick(cfg, "thinkingConfig", "thinking_config") or {}
        thoughts = (isinstance(thinking, dict) and bool(_pick(thinking, "includeThoughts", "include_thoughts"))
                    and _pick(thinking, "thinkingBudget", "thinking_budget") != 0)
        body["model"], body["messages"] = model, view  # for the server's per-request counters (docstring)
        return GeminiRequest(model=model, text=user_text, all_text="\n".join(all_texts), image_urls=image_urls,
                             max_tokens=max_tokens, stop=[s for s in stop if s], guided_choice=None,
                             modalities=tuple(modalities), thoughts=thoughts)

    # -- responses -------------------------------------------------------------------------

    @staticmethod
    def _envelope(state: SimState, model: str, extra: dict[str, Any]) -> dict[str, Any]:
        return {**extra, "modelVersion": state.config.snapshot or model, "responseId": "sim-" + state.next_id().removeprefix("chatcmpl-sim")}

    def ok(self, state: SimState, req: ParsedRequest, content: str, finish: str, usage: SimUsage,
           thought: Thought | None = None) -> web.Response:
        modalities = req.modalities if isinstance(req, GeminiRequest) else ("TEXT",)
        shown = isinstance(req, GeminiRequest) and req.thoughts  # includeThoughts: thoughts come back
        parts: list[dict[str, Any]] = []
        output, thought_tokens = usage.output_tokens, 0
        if thought is not None:  # the simulated model thinks (evalkit.sim.thinking), counted apart
            output, thought_tokens = usage.output_tokens - usage.reasoning_tokens, usage.reasoning_tokens
            if shown:
                parts.append({"text": thought.text, "thought": True})
        elif content and shown:
            parts.append({"text": THOUGHT_TEXT, "thought": True})
            thought_tokens = server_estimate_tokens(THOUGHT_TEXT)
        if content and "IMAGE" in modalities and req.image_urls:
            # PIL work on the loop: simulated inputs are small, and ok() cannot await
            png = simulated_edit(base64.b64decode(req.image_urls[0].partition(",")[2]))
            if "TEXT" in modalities:
                parts.append({"text": EDIT_TEXT})
            parts.append({"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png).decode("ascii")}})
            output = server_estimate_tokens(EDIT_TEXT) + IMAGE_OUTPUT_TOKENS
        elif content:
            parts.append({"text": content})
        meta: dict[str, Any] = {"promptTokenCount": usage.input_tokens, "candidatesTokenCount": output,
                                "totalTokenCount": usage.input_tokens + output + thought_tokens}
        if thought is not None and thought.cut:
            del meta["candidatesTokenCount"]  # the real API leaves out a count of no answer tokens
        if usage.cached_input_tokens:
            meta["cachedContentTokenCount"] = usage.cached_input_tokens
        if thought_tokens:
            meta["thoughtsTokenCount"] = thought_tokens
        meta.update(self.tier_usage(req))
        # a reply cut off with its thoughts hidden has no parts at all, as the real API sends it
        candidate = {"content": {"role": "model", "parts": parts} if parts or thought is None else {"role": "model"},
                     "finishReason": "MAX_TOKENS" if finish == "length" else "STOP", "index": 0}
        return web.json_response(self._envelope(state, req.model, {"candidates": [candidate],
                                                                   "usageMetadata": meta}),
                                 headers=self.tier_headers(req))

    def error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        code = _STATUS.get(kind, "INTERNAL")
        if status == 504:
            code = "DEADLINE_EXCEEDED"
        if kind == "overloaded":
            message = "The model is overloaded. Please try again later."
        err: dict[str, Any] = {"code": status, "message": message, "status": code}
        if status == 429:
            delay = _delay_from(headers)
            err["details"] = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                               "violations": [{"quotaMetric": "generativelanguage.googleapis.com/"
                                               "generate_content_requests", "quotaId": "SimRequestsPerMinute"}]}]
            if delay is not None:
                err["details"].append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay})
        return web.json_response({"error": err}, status=status)

    def refusal(self, state: SimState, req: ParsedRequest) -> web.Response:
        meta = {"promptTokenCount": server_estimate_tokens(req.all_text), "totalTokenCount": server_estimate_tokens(req.all_text)}
        return web.json_response(self._envelope(state, req.model, {"promptFeedback": {"blockReason": "SAFETY"},
                                                                   "usageMetadata": meta}))

    def cached_tokens(self, state: SimState, body: Any, image_sizes: list[tuple[int, int]]) -> int:
        """The server's automatic prefix caching, over the OpenAI-shaped view `parse` stored."""
        return state.prefix_cache.lookup_and_store(prompt_chunks(body.get("messages") or [], image_sizes))


def _delay_from(headers: dict[str, str] | None) -> str | None:
    """The server's advertised wait as a google.protobuf.Duration string ("0.05s")."""
    if not headers:
        return None
    try:
        if "retry-after-ms" in headers:
            return f"{int(headers['retry-after-ms']) / 1000:g}s"
        return f"{float(headers['Retry-After']):g}s" if "Retry-After" in headers else None
    except ValueError:
        return None
