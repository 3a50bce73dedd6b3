"""A Gemini generateContent reply, read from its JSON (as the API sends it) into a core Response.

The provider asks the SDK for the raw body instead of its parsed model: the SDK's validation
drops a whole paid-for answer over a malformed token count, and takes a reply with no
candidates for an empty answer. Here a prompt block (`promptFeedback.blockReason`) is a refusal,
a reply with no candidates and no block reason is malformed, a safety finish without text is a
refusal, and token counts that are not non-negative integers are 0. Fields are camelCase on the
wire; snake_case is read too.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.types import Response, Usage
from evalkit.providers.wire.reply_json import (
    first_of,
    list_of,
    malformed,
    member,
    optional_text,
    snapshot,
    string_of,
    token_count,
)

# finish reasons that mean the model declined on content grounds (a refusal when no text came back)
BLOCKED = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY",
                     "IMAGE_PROHIBITED_CONTENT"})
# the SDK resumes these when a continuation token comes with them (so does the provider)
RESUMABLE = (None, "CONTINUATION")


def _pick(d: Any, camel: str, snake: str) -> Any:
    if not isinstance(d, dict):
        return None
    value = d.get(camel)
    return d.get(snake) if value is None else value


@dataclass
class GeminiReply:
    response: Response
    continuation: bytes | None = None  # the token to resume an unfinished answer with


def usage_from_gemini(meta: Any) -> Usage:
    names = {"promptTokenCount": "prompt_token_count", "candidatesTokenCount": "candidates_token_count",
             "cachedContentTokenCount": "cached_content_token_count", "thoughtsTokenCount": "thoughts_token_count"}
    counts = {camel: token_count(meta, camel) or token_count(meta, snake) for camel, snake in names.items()}
    return Usage(input_tokens=counts["promptTokenCount"], output_tokens=counts["candidatesTokenCount"],
                 cached_input_tokens=counts["cachedContentTokenCount"], reasoning_tokens=counts["thoughtsTokenCount"])


def _continuation(candidate: dict[str, Any], finish: str | None) -> bytes | None:
    token = _pick(candidate, "continuationToken", "continuation_token")
    if not isinstance(token, str) or not token or finish not in RESUMABLE:
        return None
    try:
        return base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        raise malformed("continuationToken is not base64") from None


def reply_from_gemini(d: Any) -> GeminiReply:
    """generateContent JSON -> the Response and, for an unfinished answer, its continuation token."""
    usage = usage_from_gemini(_pick(d, "usageMetadata", "usage_metadata"))
    block = _pick(_pick(d, "promptFeedback", "prompt_feedback"), "blockReason", "block_reason")
    if isinstance(block, str) and block and block != "BLOCK_REASON_UNSPECIFIED":
        raise ProviderError("refused", f"prompt blocked: {block}")
    candidates = _pick(d, "candidates", "candidates")
    if not candidates:
        raise malformed("no candidates and no block reason")
    cand = first_of(candidates, "candidates")
    finish = optional_text(_pick(cand, "finishReason", "finish_reason"))
    content = member(cand, "content", "candidates[0]")
    parts = [] if content is None else list_of(member(content, "parts", "candidates[0].content") or [],
                                                "candidates[0].content.parts")
    texts: list[str] = []
    thoughts: list[str] = []
    for i, part in enumerate(parts):
        text = member(part, "text", f"parts[{i}]")
        if text is None:
            continue  # an image or other non-text part
        (thoughts if part.get("thought") is True else texts).append(string_of(text, f"parts[{i}].text"))
    text = "".join(texts)
    if finish in BLOCKED and not text.strip():
        raise ProviderError("refused", f"blocked: finish_reason {finish}")
    return GeminiReply(Response(text=text, usage=usage, finish_reason=finish, reasoning="".join(thoughts) or None,
                                served_by=snapshot(_pick(d, "modelVersion", "model_version"))),
                       _continuation(cand, finish))


def response_from_gemini(d: Any) -> Response:
    """generateContent JSON -> Response (an unfinished answer as far as it goes)."""
    return reply_from_gemini(d).response


def joined_hops(first: Response, then: Response) -> Response:
    """One answer from two continuation hops: texts joined, counts added, the last hop's finish."""
    usage = Usage()
    usage.add(first.usage)
    usage.add(then.usage)
    reasoning = (first.reasoning or "") + (then.reasoning or "")
    return Response(text=first.text + then.text, usage=usage, finish_reason=then.finish_reason,
                    reasoning=reasoning or None, served_by=then.served_by or first.served_by,
                    served_tier=then.served_tier or first.served_tier)
