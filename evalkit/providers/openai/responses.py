"""OpenAI's Responses API (`POST /v1/responses`; issue 47, item 1): the request body and the reply, mapped
onto what Chat Completions sends and reads (platform.openai.com/docs/api-reference/responses, read 2026-11-29).

The request: the system prompt as `instructions`, the other messages as `input` (user text as `input_text`
parts, images as `input_image` parts holding data URLs, with `detail` when `--detail` is given),
`max_output_tokens`, `text.format` for `--structured`, `reasoning: {effort}` for `--reasoning-effort` (`--extra '{"reasoning": {"summary":
"auto"}}'` adds a summary, merged key by key), `store: false` unless `--extra` says otherwise. The API has no
`seed` and no `stop`: neither is sent, and stop strings cut the answer here, as a server would have.

The reply is read by the Chat Completions reader (format.response_from_openai) after it is put in that shape,
so a cut-off (`status: incomplete`, reason `max_output_tokens`: finish "length"), the content filter (reason
`content_filter`), a refusal part, usage, reasoning tokens, cached tokens and the served snapshot are classified
exactly as on Chat Completions, by the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, ImagePart, Message, Response, TextPart
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.openai.format import response_from_openai
from evalkit.providers.structured import responses_fields
from evalkit.providers.wire.reply_json import malformed, member, optional_text

ROUTE = "/responses"
BATCH_URL = "/v1/responses"
_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def responses_input(messages: Sequence[Message], images: Sequence[PreparedImage] | Sequence[str],
                    detail: str | None = None) -> tuple[str | None, list[dict[str, Any]]]:
    """(instructions, input items): system text becomes `instructions`; images are `input_image` parts
    (prepared images as data URLs, or placeholder strings a caller splices them into), in their order."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    it = iter(images)
    for m in messages:
        if m.role == "system" and all(isinstance(p, TextPart) for p in m.parts):
            instructions.append(m.text())
            continue
        if m.role == "assistant":  # an earlier answer (few-shot): the API reads it as output text
            items.append({"role": "assistant", "content": m.text()})
            continue
        content: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, ImagePart):
                img = next(it)
                part: dict[str, Any] = {"type": "input_image",
                                        "image_url": img if isinstance(img, str) else img.data_uri()}
                if detail is not None:
                    part["detail"] = detail
                content.append(part)
            else:
                content.append({"type": "input_text", "text": p.text})
        items.append({"role": m.role, "content": content})
    return ("\n\n".join(instructions) if instructions else None), items


def responses_body(model: str, messages: Sequence[Message], images: Sequence[PreparedImage] | Sequence[str],
                   params: GenParams, *, send_temperature: bool = True,
                   reasoning: dict[str, Any] | None = None) -> dict[str, Any]:
    """The request body. `reasoning`: the chat switch's fields (providers/reasoning.py); OpenAI's
    `reasoning_effort` becomes `reasoning.effort`, any other field (a server's) is sent as it is."""
    instructions, items = responses_input(messages, images, params.detail)
    body: dict[str, Any] = {"model": model, "input": items, "max_output_tokens": params.max_tokens, "store": False}
    if instructions is not None:
        body["instructions"] = instructions
    if send_temperature:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    fields = dict(reasoning or {})
    effort = fields.pop("reasoning_effort", None)
    if effort is not None:
        fields["reasoning"] = {"effort": effort}
    body.update(fields)
    body.update(responses_fields(params))  # --structured: text.format (providers/structured.py)
    for key, value in params.extra_dict().items():
        mine = body.get(key)
        body[key] = {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
    return body


def is_responses_body(body: Any) -> bool:
    """A request body (a batch line's) for the Responses API rather than Chat Completions."""
    return isinstance(body, dict) and "input" in body and "messages" not in body


def as_chat_reply(d: Any) -> dict[str, Any]:
    """A Responses reply in Chat Completions' shape: the output text, refusal and reasoning summary of its
    message and reasoning items, the finish its status means, its usage under chat's names."""
    output = member(d, "output", "reply")
    if not isinstance(output, list):
        raise malformed("output is not a list")
    texts: list[str] = []
    refusals: list[str] = []
    summaries: list[str] = []
    message_seen = False
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            message_seen = True
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    refusals.append(optional_text(part.get("refusal")) or "refusal")
        elif kind == "reasoning":
            summaries += [s["text"] for s in item.get("summary") or []
                          if isinstance(s, dict) and isinstance(s.get("text"), str)]
    status = optional_text(d.get("status"))
    if status == "failed":
        error = d.get("error") if isinstance(d.get("error"), dict) else {}
        raise ProviderError("transient", f"response failed: {optional_text(error.get('message')) or 'no reason'}")
    details = d.get("incomplete_details")
    reason = optional_text(details.get("reason")) if isinstance(details, dict) else None
    finish = _FINISH.get(reason or "", reason or "incomplete") if status == "incomplete" else "stop"
    if not message_seen and status != "incomplete":  # no answer in it (cut off before one: "", as on chat)
        raise malformed("no message in output")
    content = "".join(texts)
    usage = d.get("usage") if isinstance(d.get("usage"), dict) else {}
    chat_usage = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
                  "prompt_tokens_details": usage.get("input_tokens_details"),
                  "completion_tokens_details": usage.get("output_tokens_details")}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusals:
        message["refusal"] = " ".join(refusals)
    if summaries:
        message["reasoning_content"] = "\n\n".join(summaries)
    return {"model": d.get("model"), "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": chat_usage, **({"service_tier": d["service_tier"]} if "service_tier" in d else {})}


def response_from_responses(d: Any, stop: Sequence[str] | None = None) -> Response:
    """Responses JSON -> Response, classified by the Chat Completions reader; stop strings (not sent: the API
    has none) cut the text here."""
    if not isinstance(d, dict):
        raise ProviderError("transient", "malformed reply: not a JSON object")
    out = response_from_openai(as_chat_reply(d))
    for s in stop or ():
        cut = out.text.find(s)
        if cut >= 0:
            out.text = out.text[:cut]
    return out
