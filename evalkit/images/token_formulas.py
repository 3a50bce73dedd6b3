"""What one image costs in input tokens, per model family and per resolution setting (issue 45, item 2).

A provider's record names one of these callables (`ProviderInfo.image_tokens`); the model's name picks its
family, and `--detail` / `--media-resolution` the formula's branch. Every figure here has its source and the
date it was read; the family patterns are here, in one place. They estimate a dry run, `--max-cost`'s
reservations and batch sizing; what is billed is what the provider reports.

OpenAI (platform.openai.com/docs/guides/images-vision, "Calculating costs", read 2026-11-29, as quoted in
community.openai.com/t/1344040 and /t/1262691; the guide itself was not in the stored reference):
- tiles (GPT-4o, GPT-4.1, GPT-4.5, the o-series but o4-mini, and any model not named below): fit within
  2048 x 2048, then the shortest side down to 768, then `base + tile` tokens per 512-px square; `detail:
  low` is `base` flat. base/tile 85/170; gpt-4o-mini 2833/5667; o1 and o3 75/150.
- patches (gpt-4.1-mini, gpt-4.1-nano, o4-mini, gpt-5-mini, gpt-5-nano): 32 x 32 px patches covering the
  image, at most 1536 (a larger image is scaled down until it fits), times the model's multiplier: 1.62,
  2.46, 1.72, 1.62, 2.46, rounded up. `detail: low` changes nothing there: the guide gives no low branch
  for them, and the requests measured in community.openai.com/t/1262691 (128 x 64, low and high) cost the
  same. Measurements in /t/1344040 put gpt-5-mini at 1.2 and gpt-5-nano at 1.5: the guide's figures are
  kept (an estimate that errs high).

Gemini (ai.google.dev/gemini-api/docs/media-resolution, "Token counts", and the API reference of
GenerationConfig.MediaResolution, the same text as google-genai 3.6's `types.MediaResolution`; read
2026-11-29):
- Gemini 2.x and earlier: without a setting, 258 tokens for an image of at most 384 x 384, else 258 per
  768 x 768 tile (ai.google.dev/gemini-api/docs/tokens); MEDIA_RESOLUTION_LOW 64 tokens, MEDIUM 256, HIGH
  256 ("zoomed reframing with 256 tokens").
- Gemini 3 and later: a budget per image by setting, whatever its size: LOW 280, MEDIUM 560, HIGH 1120,
  and HIGH's 1120 without a setting (the page's default for images).

Anthropic (docs.anthropic.com/en/docs/build-with-claude/vision, read 2026-11-25): about w*h/750 after the
API's own resize to at most 1568 px and 1.15 MP; it takes no resolution setting.
"""

from __future__ import annotations

import math
import re
from typing import Protocol

# (pattern, multiplier): a model whose name starts with the pattern, then ends or goes on after "-"
PATCH_FAMILIES: tuple[tuple[str, float], ...] = (
    ("gpt-4.1-mini", 1.62), ("gpt-4.1-nano", 2.46), ("o4-mini", 1.72), ("gpt-5-mini", 1.62), ("gpt-5-nano", 2.46))
PATCH = 32
PATCH_CAP = 1536
# (pattern, base, per tile); any other OpenAI-shaped model: DEFAULT_TILES
TILE_FAMILIES: tuple[tuple[str, int, int], ...] = (("gpt-4o-mini", 2833, 5667), ("o1", 75, 150), ("o3", 75, 150))
DEFAULT_TILES = (85, 170)
GEMINI_3 = re.compile(r"gemini-(?:[3-9]|[1-9]\d)(?:[.-]|$)")  # Gemini 3, 3.1, …, and later generations
GEMINI_3_TOKENS = {"low": 280, "medium": 560, "high": 1120, None: 1120}
GEMINI_2_TOKENS = {"low": 64, "medium": 256, "high": 256}


class ImageTokens(Protocol):
    """A provider's formula: tokens for one image of width x height as sent, for this model (its family)
    and resolution setting (`--detail` or `--media-resolution`; None: the provider's default)."""

    def __call__(self, width: int, height: int, model: str = "", setting: str | None = None) -> int: ...


def _name(model: str) -> str:
    """The model's own name: a router's VENDOR/MODEL and a service's SERVICE/MODEL end with it."""
    return model.rsplit("/", 1)[-1].lower()


def _family(name: str, pattern: str) -> bool:
    return name == pattern or name.startswith(pattern + "-")


def patch_multiplier(model: str) -> float | None:
    """The multiplier of a model billed by 32-px patches, or None (a tile model)."""
    name = _name(model)
    return next((m for pattern, m in PATCH_FAMILIES if _family(name, pattern)), None)


def tile_rates(model: str) -> tuple[int, int]:
    """(base, per tile) of a model billed by 512-px tiles."""
    name = _name(model)
    return next(((base, tile) for pattern, base, tile in TILE_FAMILIES if _family(name, pattern)), DEFAULT_TILES)


def tiles(width: int, height: int) -> int:
    """512-px squares covering the image after fitting 2048 x 2048, then its shortest side down to 768."""
    s = min(1.0, 2048 / max(width, height))
    w, h = width * s, height * s
    s = min(1.0, 768 / min(w, h))
    return math.ceil(w * s / 512) * math.ceil(h * s / 512)


def patches(width: int, height: int) -> int:
    """32-px patches covering the image, after the guide's scaling down of one that needs more than 1536."""
    n = math.ceil(width / PATCH) * math.ceil(height / PATCH)
    if n <= PATCH_CAP:
        return n
    r = math.sqrt(PATCH * PATCH * PATCH_CAP / (width * height))
    r *= min(math.floor(width * r / PATCH) / (width * r / PATCH), math.floor(height * r / PATCH) / (height * r / PATCH))
    return min(PATCH_CAP, math.ceil(width * r / PATCH - 1e-6) * math.ceil(height * r / PATCH - 1e-6))


def openai_image_tokens(width: int, height: int, model: str = "", setting: str | None = None) -> int:
    """OpenAI's formula for the model's family (module docstring); `low` is the tile models' base alone. Also
    the estimate for OpenAI-shaped servers that count otherwise (approximate)."""
    multiplier = patch_multiplier(model)
    if multiplier is not None:
        return math.ceil(patches(width, height) * multiplier - 1e-9)
    base, tile = tile_rates(model)
    return base if setting == "low" else base + tile * tiles(width, height)


def gemini_image_tokens(width: int, height: int, model: str = "", setting: str | None = None) -> int:
    """Gemini's count for the model's generation and media resolution (module docstring)."""
    if GEMINI_3.match(_name(model)):
        return GEMINI_3_TOKENS.get(setting, GEMINI_3_TOKENS[None])
    if setting in GEMINI_2_TOKENS:
        return GEMINI_2_TOKENS[setting]
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def anthropic_image_tokens(width: int, height: int, model: str = "", setting: str | None = None) -> int:
    """About w*h/750 after the API's own resize to <= 1568 px / 1.15 MP (no setting changes it)."""
    s = min(1.0, 1568 / max(width, height), math.sqrt(1.15e6 / (width * height)))
    return math.ceil(width * s * height * s / 750)
