"""OpenAI chat-completions wire format, shared by the SDK and the raw aiohttp providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, ImagePart, Message, Response, TextPart, Usage, reported_cost
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.structured import openai_fields
from evalkit.providers.wire.reply_json import first_of, member, optional_text, snapshot, text_of, token_count


def openai_messages(messages: Sequence[Message], images: Sequence[PreparedImage] | Sequence[str],
                    detail: str | None = None) -> list[dict[str, Any]]:
    """Messages with images as `image_url` parts, in their original order.

    `images` are prepared images (sent as base64 data URIs) or ready-made URL strings
    (placeholders that a caller splices the data URIs into after JSON encoding). `detail` (`--detail`) goes
    in each image part; without it the part is as before (the API's default, auto).
    """
    out: list[dict[str, Any]] = []
    it = iter(images)
    for m in messages:
        if all(isinstance(p, TextPart) for p in m.parts):
            out.append({"role": m.role, "content": m.text()})
            continue
        content: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ImagePart):
                img = next(it)
                url = img if isinstance(img, str) else img.data_uri()
                part = {"url": url, "detail": detail} if detail is not None else {"url": url}
                content.append({"type": "image_url", "image_url": part})
            else:
                content.append({"type": "text", "text": p.text})
        out.append({"role": m.role, "content": content})
    return out


def chat_body(model: str, messages: list[dict[str, Any]], params: GenParams, *, max_tokens_field: str = "max_tokens",
              send_temperature: bool = True, reasoning: dict[str, Any] | None = None) -> dict[str, Any]:
    """The request body; server-specific extras (chat_template_kwargs, guided_choice, ...) pass through.
    `reasoning` holds the fields of the reasoning switch (providers/reasoning.py); an `extra` object of
    the same name is merged into it, key by key, and wins."""
    body: dict[str, Any] = {"model": model, "messages": messages, max_tokens_field: params.max_tokens}
    if send_temperature:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    body.update(reasoning or {})
    body.update(openai_fields(params))  # --structured: response_format (providers/structured.py)
    for key, value in params.extra_dict().items():
        mine = (reasoning or {}).get(key)
        body[key] = {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
    return body


def usage_from_openai(u: Any, *, reports_cost: bool = False) -> Usage:
    """Token counts; any that is not a non-negative integer (or a usage that is not an object) is 0.
    With `reports_cost`, `usage.cost` (OpenRouter: credits, 1 credit = 1 USD) is what the answer cost."""
    prompt_details = u.get("prompt_tokens_details") if isinstance(u, dict) else None
    completion_details = u.get("completion_tokens_details") if isinstance(u, dict) else None
    return Usage(
        input_tokens=token_count(u, "prompt_tokens"),
        output_tokens=token_count(u, "completion_tokens"),
        cached_input_tokens=token_count(prompt_details, "cached_tokens"),
        reasoning_tokens=token_count(completion_details, "reasoning_tokens"),
        cost_usd=reported_cost(u.get("cost")) if reports_cost and isinstance(u, dict) else None,
    )


def response_from_openai(d: Any, *, reports_cost: bool = False) -> Response:
    """Chat-completion JSON -> Response. ProviderError("transient", "malformed reply: ...") when the body
    holds no usable answer, ProviderError("refused") when the content filter or the model's refusal
    replaced the answer. `reports_cost`: a router's reply (OpenRouter), which says what it cost and,
    in `provider`, who answered (kept with the snapshot)."""
    choice = first_of(member(d, "choices", "reply"), "choices")
    msg = member(choice, "message", "choices[0]")
    text = text_of(member(msg, "content", "choices[0].message"), "message.content")
    finish = optional_text(choice.get("finish_reason"))
    refusal = optional_text(msg.get("refusal"))
    if not text and (finish == "content_filter" or refusal):
        raise ProviderError("refused", f"content refused ({refusal or 'content_filter'})")
    reasoning = optional_text(msg.get("reasoning_content")) or optional_text(msg.get("reasoning"))
    served_by = snapshot(d.get("model"), d.get("system_fingerprint"))
    upstream = optional_text(d.get("provider")) if reports_cost else None
    if upstream and served_by:
        served_by = f"{served_by} · via {upstream[:60]}"
    return Response(text=text, usage=usage_from_openai(d.get("usage"), reports_cost=reports_cost),
                    finish_reason=finish, reasoning=reasoning, served_by=served_by)

