"""OpenAI chat-completions wire format, shared by the SDK and the raw aiohttp providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, ImagePart, Message, Response, TextPart, Usage
from evalkit.images.pipeline import PreparedImage


def openai_messages(messages: Sequence[Message], images: Sequence[PreparedImage] | Sequence[str]
                    ) -> list[dict[str, Any]]:
    """Messages with images as `image_url` parts, in their original order.

    `images` are prepared images (sent as base64 data URIs) or ready-made URL strings
    (placeholders that a caller splices the data URIs into after JSON encoding).
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
                content.append({"type": "image_url", "image_url": {"url": url}})
            else:
                content.append({"type": "text", "text": p.text})
        out.append({"role": m.role, "content": content})
    return out


def chat_body(model: str, messages: list[dict[str, Any]], params: GenParams, *, max_tokens_field: str = "max_tokens",
              send_temperature: bool = True) -> dict[str, Any]:
    """The request body; server-specific extras (chat_template_kwargs, guided_choice, ...) pass through."""
    body: dict[str, Any] = {"model": model, "messages": messages, max_tokens_field: params.max_tokens}
    if send_temperature:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    body.update(params.extra_dict())
    return body


def usage_from_openai(u: dict[str, Any] | None) -> Usage:
    u = u or {}
    prompt_details = u.get("prompt_tokens_details") or {}
    completion_details = u.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int(u.get("prompt_tokens") or 0),
        output_tokens=int(u.get("completion_tokens") or 0),
        cached_input_tokens=int(prompt_details.get("cached_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def response_from_openai(d: dict[str, Any]) -> Response:
    """Chat-completion JSON -> Response. Raises KeyError/TypeError on a malformed body,
    ProviderError("refused") when the content filter or the model's refusal replaced the answer."""
    choice = d["choices"][0]
    msg = choice["message"]
    if not msg.get("content") and (choice.get("finish_reason") == "content_filter" or msg.get("refusal")):
        raise ProviderError("refused", f"content refused ({msg.get('refusal') or 'content_filter'})")
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    return Response(
        text=msg.get("content") or "",
        usage=usage_from_openai(d.get("usage")),
        finish_reason=choice.get("finish_reason"),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )
