"""The OpenAI / vLLM chat-completions wire format as the simulator reads and writes it.

Pure functions over JSON values, kept apart from the server so they can be tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from evalkit.sim.model import server_estimate_tokens

MALFORMED_BODY = '{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assis'


class BadRequest(Exception):
    """A request body the server rejects with 400."""


@dataclass(frozen=True)
class SimUsage:
    """Token counts of one simulated reply, as every dialect reports them."""

    input_tokens: int
    output_tokens: int  # all of the output, thinking included
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0  # the thinking part of output_tokens (evalkit.sim.thinking)


@dataclass(frozen=True)
class ParsedRequest:
    """The parts of a chat-completions body the simulator uses."""

    model: str
    text: str  # last user message's text parts joined by "\n"
    all_text: str  # every message's text, for token accounting
    image_urls: list[str]
    max_tokens: int | None
    stop: list[str]
    guided_choice: list[str] | None
    service_tier: str | None = None  # the tier the body asks for (OpenAI-shaped dialects; sim.machinery.tiers)
    answer_tool: str | None = None  # the tool a structured request forces (answer_forms): answer in it


def message_parts(msg: Any, i: int) -> tuple[list[str], list[str]]:
    """(texts, image data URLs) of one message, validating its shape."""
    if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
        raise BadRequest(f"messages[{i}] must be an object with a string 'role'")
    content = msg.get("content")
    if content is None:
        return [], []
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise BadRequest(f"messages[{i}].content must be a string or a list of parts")
    texts: list[str] = []
    images: list[str] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            ref = part.get("image_url")
            url = ref.get("url") if isinstance(ref, dict) else ref
            if not isinstance(url, str):
                raise BadRequest(f"messages[{i}].content[{j}].image_url.url must be a string")
            images.append(url)
        else:
            raise BadRequest(f"messages[{i}].content[{j}] has an unsupported part type {kind!r}")
    return texts, images


def parse_body(body: Any) -> ParsedRequest:
    """Validate a chat-completions body (unknown extra fields are accepted, as vLLM does)."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    if body.get("stream"):
        raise BadRequest("streaming is not supported by evalkit sim")
    user_text = ""
    all_texts: list[str] = []
    image_urls: list[str] = []
    for i, msg in enumerate(messages):
        texts, images = message_parts(msg, i)
        all_texts.extend(texts)
        image_urls.extend(images)
        if msg["role"] == "user":
            user_text = "\n".join(texts)
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise BadRequest(f"'{name}' must be a number")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("'max_tokens' must be a positive integer")
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str) and s]
    guided = body.get("guided_choice")
    guided_choice = [str(c) for c in guided] if isinstance(guided, list) and guided else None
    return ParsedRequest(model, user_text, "\n".join(all_texts), image_urls, max_tokens, stops, guided_choice)


def error_response(status: int, message: str, type_: str, code: Any = None, headers: dict[str, str] | None = None) -> web.Response:
    payload = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return web.json_response(payload, status=status, headers=headers)


def shape_reply(content: str, meant: str | None, req: ParsedRequest) -> tuple[str, str]:
    """Apply guided_choice, stop strings and max_tokens to a reply; returns (content, finish_reason)."""
    if req.guided_choice is not None and content not in req.guided_choice:
        content = meant if meant in req.guided_choice else req.guided_choice[0]
    for s in req.stop:
        cut = content.find(s)
        if cut >= 0:
            content = content[:cut]
    if req.max_tokens is not None and server_estimate_tokens(content) > req.max_tokens:
        return content[: req.max_tokens * 4], "length"
    return content, "stop"
