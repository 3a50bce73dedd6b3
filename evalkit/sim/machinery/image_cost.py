"""The server's count of a request's image tokens, by the providers' documented formulas for the model's
family and the resolution the request asks for (issue 45, item 2), so the usage a simulated reply reports
moves with `detail` and `mediaResolution` as the real services' does.

The server's own reading of the documents (it never imports the client side):
- OpenAI (platform.openai.com/docs/guides/images-vision, read 2026-11-29): models billed by 32-px patches
  (gpt-4.1-mini 1.62, gpt-4.1-nano 2.46, o4-mini 1.72, gpt-5-mini 1.62, gpt-5-nano 2.46; at most 1536
  patches, rounded up), whatever the detail; the others by 512-px tiles after fitting 2048 and a shortest
  side of 768, 85 + 170 per tile (gpt-4o-mini 2833 + 5667, o1/o3 75 + 150), `low` the base alone.
- Gemini (ai.google.dev/gemini-api/docs/media-resolution, read 2026-11-29): Gemini 3 and later 280 / 560 /
  1120 per image (LOW / MEDIUM / HIGH; HIGH's without a setting); earlier models 64 / 256 / 256 with a
  setting, else 258 for an image within 384 x 384 and 258 per 768-px tile.

A request asking for no setting, to a model of the default families (tiles at 85 + 170, Gemini 2.x), is
counted as the simulator always counted (server_image_tokens), so the figures earlier runs and fixtures
recorded stand.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from evalkit.sim.model import server_image_tokens

SERVER_PATCH_MULTIPLIERS = {"gpt-4.1-mini": 1.62, "gpt-4.1-nano": 2.46, "o4-mini": 1.72, "gpt-5-mini": 1.62,
                            "gpt-5-nano": 2.46}
SERVER_TILE_RATES = {"gpt-4o-mini": (2833, 5667), "o1": (75, 150), "o3": (75, 150)}
_GEMINI_3 = re.compile(r"gemini-(?:[3-9]|[1-9]\d)(?:[.-]|$)")
_GEMINI_3_TOKENS = {"MEDIA_RESOLUTION_LOW": 280, "MEDIA_RESOLUTION_MEDIUM": 560, "MEDIA_RESOLUTION_HIGH": 1120}
_GEMINI_2_TOKENS = {"MEDIA_RESOLUTION_LOW": 64, "MEDIA_RESOLUTION_MEDIUM": 256, "MEDIA_RESOLUTION_HIGH": 256}


def _family(model: str, table: dict[str, Any]) -> Any:
    name = model.rsplit("/", 1)[-1].lower()
    return next((v for k, v in table.items() if name == k or name.startswith(k + "-")), None)


def server_patches(width: int, height: int) -> int:
    """32-px patches covering the image; past 1536, the image scaled down as the guide says."""
    n = math.ceil(width / 32) * math.ceil(height / 32)
    if n <= 1536:
        return n
    r = math.sqrt(32 * 32 * 1536 / (width * height))
    r *= min(math.floor(width * r / 32) / (width * r / 32), math.floor(height * r / 32) / (height * r / 32))
    return min(1536, math.ceil(width * r / 32 - 1e-6) * math.ceil(height * r / 32 - 1e-6))


def server_tile_tokens(width: int, height: int, base: int, tile: int) -> int:
    s = min(1.0, 2048 / max(width, height))
    w, h = width * s, height * s
    s = min(1.0, 768 / min(w, h))
    return base + tile * math.ceil(w * s / 512) * math.ceil(h * s / 512)


def server_openai_image_cost(model: str, details: Sequence[str | None], sizes: Sequence[tuple[int, int]]) -> int:
    """An OpenAI-shaped request's image tokens, image by image (its `detail` beside its size)."""
    multiplier = _family(model, SERVER_PATCH_MULTIPLIERS)
    rates = _family(model, SERVER_TILE_RATES)
    total = 0
    for i, (w, h) in enumerate(sizes):
        detail = details[i] if i < len(details) else None
        if multiplier is not None:
            total += math.ceil(server_patches(w, h) * multiplier - 1e-9)
        elif detail is None and rates is None:
            total += server_image_tokens(w, h)
        else:
            base, tile = rates or (85, 170)
            total += base if detail == "low" else server_tile_tokens(w, h, base, tile)
    return total


def server_gemini_image_cost(model: str, resolution: str | None, sizes: Sequence[tuple[int, int]]) -> int:
    """A generateContent request's image tokens under its generationConfig.mediaResolution."""
    if _GEMINI_3.match(model.rsplit("/", 1)[-1].lower()):
        return _GEMINI_3_TOKENS.get(resolution or "", 1120) * len(sizes)
    if resolution in _GEMINI_2_TOKENS:
        return _GEMINI_2_TOKENS[resolution] * len(sizes)
    return sum(server_image_tokens(w, h) for w, h in sizes)


def image_details(body: Any) -> tuple[str | None, ...]:
    """The `detail` of each `image_url` part of a chat-completions body, or each `input_image` part of a Responses
    body's `input` (issue 47), in order (None: not given)."""
    out: list[str | None] = []
    messages = (body.get("messages") or body.get("input")) if isinstance(body, dict) else None
    for msg in messages if isinstance(messages, list) else []:
        content = msg.get("content") if isinstance(msg, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                ref = part.get("image_url")
                detail = ref.get("detail") if isinstance(ref, dict) else None
                out.append(detail if isinstance(detail, str) else None)
            elif isinstance(part, dict) and part.get("type") == "input_image":
                detail = part.get("detail")
                out.append(detail if isinstance(detail, str) else None)
    return tuple(out)


def media_resolution(body: Any) -> str | None:
    """A generateContent body's generationConfig.mediaResolution (either spelling), or None."""
    if not isinstance(body, dict):
        return None
    config = body.get("generationConfig", body.get("generation_config"))
    value = config.get("mediaResolution", config.get("media_resolution")) if isinstance(config, dict) else None
    return value if isinstance(value, str) else None


def server_request_image_tokens(model: str, body: Any, sizes: Sequence[tuple[int, int]]) -> int:
    """The image tokens of one request as its service counts them (module docstring): a Gemini body (its
    `contents`) by Gemini's rule, a chat-completions body by OpenAI's, any other as the simulator always did."""
    if isinstance(body, dict) and "contents" in body:
        return server_gemini_image_cost(model, media_resolution(body), sizes)
    if isinstance(body, dict) and isinstance(body.get("messages") or body.get("input"), list) \
            and "anthropic_version" not in body:  # chat completions, or OpenAI's Responses API
        return server_openai_image_cost(model, image_details(body), sizes)
    return sum(server_image_tokens(w, h) for w, h in sizes)
