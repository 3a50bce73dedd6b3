"""What each provider accepts as an image (an ImageLimits that its record in evalkit.providers.registry
names, and may share with another record), and the pure planning that fits an image to it.

Why: a provider either rejects an image that is too big (a wasted request, counted as a
permanent error) or silently resizes it again (latency, and a second resampling we do not
control). Sending images already at the provider's own working size avoids both, and doing it
here, from the image's header size alone, keeps the decision cheap, deterministic and testable.

Conventions:
- max_side / max_pixels are what we *send at most*: the size the provider would resize to
  anyway (Anthropic 1568 px and ~1.15 MP, OpenAI high detail 2048 px, Gemini 3072 px), so
  nothing the model sees is lost. reject_side is where the provider refuses the image.
- max_bytes / max_request_bytes are checked against the base64 text actually sent (4/3 of the
  encoded bytes). Some providers count decoded bytes; counting base64 is the conservative side.
- MB here is 10**6 bytes (conservative next to MiB).
- GIF is left out of every `formats`: OpenAI accepts only non-animated GIFs and we cannot tell
  cheaply, so GIFs are re-encoded (first frame) like any other unaccepted format.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Transform
from evalkit.images.pipeline import fit_size

LIMITS_VERSION = "2026-11-22"  # bump when a figure below changes (what is sent changes with it)
READ_ON = "2026-11-22"
MB = 1_000_000

QUALITY_STEPS = (90, 85, 75, 60)  # JPEG qualities tried in turn when an image is over the byte limit
SHRINK = 0.8  # then each further attempt scales the long side by this
MIN_SIDE = 64  # below this an image is useless; give up instead


@dataclass(frozen=True)
class ImageLimits:
    """One provider's image limits (None = no limit) and where the figures come from. The figures may serve
    several providers (a new OpenAI-shaped one reuses OpenAI's): the record that names them stamps its
    own name on them (providers.registry.ProviderInfo), for the messages below."""

    max_bytes: int | None  # per image, base64 text
    max_side: int | None  # long side we send at most (the provider's own resize-to size)
    max_pixels: int | None  # pixels we send at most (same reason)
    max_images: int | None  # images per request
    formats: tuple[str, ...]  # accepted MIME types; () = anything
    source: str
    read_on: str
    name: str = ""  # the provider whose record names them (messages say who refuses); "": "the provider"
    reject_side: int | None = None  # the provider rejects an image with a side above this
    many_images: tuple[int, int] | None = None  # (n, side): with more than n images, reject_side is side
    max_request_bytes: int | None = None  # all inline images of one request, base64


# https://platform.openai.com/docs/guides/images-vision : the official page is not in the
# search index; read in copies of it (openai-hd4n6.mintlify.app/docs/guides/images, a20k.com)
# and cross-checked for the 2048/768 scaling (genai.stackexchange.com q 1902 quoting the docs).
# "Up to 20MB per image, up to 500 individual images per request, up to 50 MB image bytes per
# request"; high detail: "scaled to fit within a 2048 x 2048 square", then shortest side 768
# (we stop at 2048 so patch-based models that read more than 768 px lose nothing).
OPENAI_IMAGES = ImageLimits(
    max_bytes=20 * MB, max_side=2048, max_pixels=None, max_images=500,
    formats=("image/png", "image/jpeg", "image/webp"),
    source="https://platform.openai.com/docs/guides/images-vision (via openai-hd4n6.mintlify.app/docs/guides/images)",
    read_on=READ_ON, max_request_bytes=50 * MB)

# https://platform.claude.com/docs/en/build-with-claude/vision (read 2026-11-22): up to 100
# images per API request (600 for models with a larger context: we keep the conservative 100);
# "larger than 8000x8000 px ... rejected", 2000x2000 with more than 20 images; 32 MB request
# limit; long edge > 1568 px or > ~1,600 tokens is scaled down; recommended <= 1.15 MP.
# 5 MB per image: NOT in the page as read; taken from API error reports (e.g. "image exceeds
# 5 MB maximum", github shellicar/claude-cli#323) and applied to the base64 text: conservative.
ANTHROPIC_IMAGES = ImageLimits(
    max_bytes=5 * MB, max_side=1568, max_pixels=1_150_000, max_images=100,
    formats=("image/jpeg", "image/png", "image/webp"),
    source="https://platform.claude.com/docs/en/build-with-claude/vision",
    read_on=READ_ON, reject_side=8000, many_images=(20, 2000),
    max_request_bytes=32 * MB)

# https://ai.google.dev/gemini-api/docs/image-understanding : inline data only for a "total
# request size" under 20 MB. https://docs.cloud.google.com/vertex-ai/generative-ai/docs/multimodal/image-understanding :
# Gemini 2.5 Pro/Flash "Maximum images per prompt: 3,000", inline file "7 MB", MIME types
# png/jpeg/webp/heic/heif. https://firebase.google.com/docs/vertex-ai/input-file-requirements :
# "larger images are scaled down and padded to fit a maximum resolution of 3072 x 3072".
# 7 MB per image is Vertex AI's figure; the Developer API only states the 20 MB request total,
# which 7 MB per image also keeps a single image well inside: conservative for both.
GOOGLE_IMAGES = ImageLimits(
    max_bytes=7 * MB, max_side=3072, max_pixels=None, max_images=3000,
    formats=("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"),
    source="https://ai.google.dev/gemini-api/docs/image-understanding; "
           "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/multimodal/image-understanding",
    read_on=READ_ON, max_request_bytes=20 * MB)

# OpenAI-compatible servers (vLLM, SGLang, llama.cpp) document no fixed limits: images go as
# they are unless --max-side/--max-pixels say otherwise (the server's own flags still apply).
# Azure OpenAI serves OpenAI's models: OpenAI's working size; its own refusal is "The image size must be
# greater than zero and cannot exceed 20971520 bytes" (Azure OpenAI error 400, as reported 2026-11-26).
# Images per request: 10, the lowest Azure has documented for a vision deployment (conservative).
AZURE_IMAGES = replace(OPENAI_IMAGES, max_bytes=20 * MB, max_images=10,
                       source="https://learn.microsoft.com/azure/ai-services/openai/how-to/gpt-with-vision "
                              "and the 20971520-byte refusal of Azure OpenAI (read 2026-11-26)",
                       read_on="2026-11-26")
# Amazon Bedrock's Converse API (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ImageBlock.html
# and the Converse user guide, read 2026-11-27): png, jpeg, gif or webp sent as bytes, "The maximum image
# size is 3.75 MB", "The maximum height and width of an image is 8000 px", "You can include up to 20
# images". No working size is documented across its vendors: images go up to the refusal size. Claude on
# Bedrock gets Anthropic's limits (registry.limits_for).
BEDROCK_IMAGES = ImageLimits(
    max_bytes=3_750_000, max_side=8000, max_pixels=None, max_images=20,
    formats=("image/png", "image/jpeg", "image/webp"),
    source="https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ImageBlock.html",
    read_on="2026-11-27", reject_side=8000)
VLLM_IMAGES = ImageLimits(None, None, None, None, (), source="none: server-specific", read_on=READ_ON)
COMPAT_IMAGES = ImageLimits(None, None, None, None, (), source="none: server-specific", read_on=READ_ON)
# OpenRouter passes images to the vendor that serves the model: a model of a vendor evalkit knows gets that
# vendor's limits (evalkit.providers.registry.limits_for); others go as they are.
ROUTED_IMAGES = ImageLimits(None, None, None, None, (), source="none: the serving vendor's", read_on=READ_ON)
# Vertex AI serves Gemini and Claude: a vertex/ model gets its vendor's limits (registry.limits_for); these,
# Gemini's on Vertex AI (the 7 MB inline figure above is Vertex's), stand for the provider as a whole.
VERTEX_IMAGES = replace(GOOGLE_IMAGES, read_on="2026-11-27",
                        source="https://docs.cloud.google.com/vertex-ai/generative-ai/docs/multimodal/image-understanding"
                               "; Claude on Vertex AI: Anthropic's limits")


def encoded_size(nbytes: int) -> int:
    """Length of the base64 text for nbytes of image data (what goes over the wire)."""
    return 4 * math.ceil(nbytes / 3)


def _tighter(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _region(t: Transform, width: int, height: int) -> tuple[int, int]:
    """Size of the region the pipeline resizes: after rotation and crop (as images.region.plan does)."""
    angle = t.rotate % 360
    if angle % 90 == 0:
        w, h = (height, width) if (angle // 90) % 2 else (width, height)
    else:  # arbitrary angle: PIL's expanded bounding box
        r = math.radians(angle)
        c, s = abs(math.cos(r)), abs(math.sin(r))
        w, h = round(width * c + height * s), round(width * s + height * c)
    if t.crop:
        x0, y0, x1, y1 = t.crop
        w, h = min(w, x1) - max(0, x0), min(h, y1) - max(0, y0)
    return max(1, w), max(1, h)


def fit_transform(limits: ImageLimits | None, transform: Transform, width: int, height: int, *,
                  mime: str | None = None, nbytes: int | None = None) -> Transform:
    """The user's transform tightened to the provider's limits, for a width x height source.

    max_side / max_pixels become the tighter of the user's and the provider's, but only when the
    provider's actually changes the output, so an image the provider takes as it is keeps the
    user's transform (and its cache key): small images still go as they are. fmt becomes JPEG
    (unless the user chose one) when the provider forces a re-encode: its limits resize the
    image, its format (mime) is not accepted, or its bytes (nbytes) exceed the limit.
    Pure arithmetic on the header size: nothing is decoded.
    """
    if limits is None:
        return transform
    t = transform
    side, pixels = _tighter(t.max_side, limits.max_side), _tighter(t.max_pixels, limits.max_pixels)
    if t.size is not None:
        fitted = fit_size(*t.size, side, pixels)
        if fitted != t.size:
            t = replace(t, size=fitted)
    else:
        region = _region(t, width, height)
        if fit_size(*region, side, pixels) != fit_size(*region, t.max_side, t.max_pixels):
            t = replace(t, max_side=side, max_pixels=pixels)
    if t.fmt is not None:
        return t
    reencode = t != transform  # the provider's limits resize it
    if mime is not None and limits.formats and _norm_mime(mime) not in limits.formats:
        reencode = True
    if nbytes is not None and limits.max_bytes is not None and encoded_size(nbytes) > limits.max_bytes:
        reencode = True
    return replace(t, fmt="JPEG") if reencode else t


def next_attempt(transform: Transform, size: tuple[int, int] | None = None) -> Transform | None:
    """The next, smaller try after a prepared image came out over the byte limit; None = give up.

    JPEG first, then quality 90 -> 85 -> 75 -> 60, then the long side x0.8 per step (from the
    size the last attempt produced, when given). Pure: the caller prepares and measures.
    """
    t = transform
    if (t.fmt or "").upper() not in ("JPEG", "JPG"):
        return replace(t, fmt="JPEG", quality=min(t.quality, QUALITY_STEPS[0]))
    lower = [q for q in QUALITY_STEPS if q < t.quality]
    if lower:
        return replace(t, quality=lower[0])
    if t.size is not None:
        w, h = (math.floor(v * SHRINK) for v in t.size)
        return replace(t, size=(w, h)) if min(w, h) >= MIN_SIDE else None
    current = t.max_side
    if size is not None:
        current = max(size) if current is None else min(current, max(size))
    if current is None:
        return None
    side = math.floor(current * SHRINK)
    if side < MIN_SIDE or (size is not None and min(size) * side / max(size) < MIN_SIDE):
        return None
    pixels = math.floor(t.max_pixels * SHRINK * SHRINK) if t.max_pixels else None
    return replace(t, max_side=side, max_pixels=pixels)


class _Prepared(Protocol):
    @property
    def data(self) -> bytes: ...
    @property
    def mime(self) -> str: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...


P = TypeVar("P", bound=_Prepared)


def prepare_within(prepare: Callable[[Transform], P], transform: Transform, limits: ImageLimits | None,
                   what: str, *, n_images: int = 1) -> tuple[P, Transform]:
    """Prepare with `prepare` (e.g. lambda t: pipeline.prepare(ImagePart(ref, t))), stepping down
    with next_attempt until the byte limit is met; -> (prepared image, transform that made it).
    Raises EvalkitError (via check_prepared) when even the smallest attempt does not fit."""
    t = transform
    while True:
        img = prepare(t)
        over = limits is not None and limits.max_bytes is not None and encoded_size(len(img.data)) > limits.max_bytes
        nxt = next_attempt(t, (img.width, img.height)) if over else None
        if nxt is None:
            check_prepared(limits, len(img.data), img.width, img.height, img.mime, what, n_images=n_images)
            return img, t
        t = nxt


def _norm_mime(mime: str) -> str:
    m = mime.lower().split(";")[0].strip()
    return "image/jpeg" if m in ("image/jpg", "image/pjpeg") else m


def check_prepared(limits: ImageLimits | None, nbytes: int, width: int, height: int, mime: str, what: str,
                   *, n_images: int = 1) -> None:
    """Raise EvalkitError (one line naming the image and the limit) if the provider would reject it."""
    if limits is None:
        return
    who = limits.name or "the provider"
    if limits.max_bytes is not None and encoded_size(nbytes) > limits.max_bytes:
        raise EvalkitError(f"image {what} is {encoded_size(nbytes):,} bytes as base64 after resizing; "
                           f"{who} accepts at most {limits.max_bytes:,} per image")
    if limits.formats and _norm_mime(mime) not in limits.formats:
        raise EvalkitError(f"image {what} is {mime}; {who} accepts {', '.join(limits.formats)}")
    reject = limits.reject_side
    if limits.many_images and n_images > limits.many_images[0]:
        reject = _tighter(reject, limits.many_images[1])
    if reject is not None and max(width, height) > reject:
        many = f" with {n_images} images in one request" if reject != limits.reject_side else ""
        raise EvalkitError(f"image {what} is {width}x{height}; {who} rejects sides above {reject} px{many}")


def check_image_count(limits: ImageLimits | None, n: int, where: str) -> None:
    """Raise EvalkitError when one request carries more images than the provider accepts."""
    if limits is not None and limits.max_images is not None and n > limits.max_images:
        raise EvalkitError(f"{where}: {n} images in one request; {limits.name or 'the provider'} "
                           f"accepts at most {limits.max_images} ({limits.source})")


def check_request_bytes(limits: ImageLimits | None, nbytes: int, where: str) -> None:
    """Raise EvalkitError when a request's images together (nbytes encoded) exceed the request limit."""
    if limits is None or limits.max_request_bytes is None:
        return
    if encoded_size(nbytes) > limits.max_request_bytes:
        raise EvalkitError(f"{where}: images total {encoded_size(nbytes):,} bytes as base64; "
                           f"{limits.name or 'the provider'} accepts at most {limits.max_request_bytes:,} per request")
