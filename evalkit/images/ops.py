"""Pure image operations used by the pipeline: size arithmetic, rotation, colour modes,
encoding, and the decode plan (what region to decode at which draft scale).

No state here; evalkit.images.pipeline owns memoisation and threads.
"""

from __future__ import annotations

import io
import math
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from evalkit.core.errors import EvalkitError

if TYPE_CHECKING:
    from PIL import Image

MIME = dict(JPEG="image/jpeg", MPO="image/jpeg", PNG="image/png", WEBP="image/webp", GIF="image/gif")
_OUT_FORMATS = ("JPEG", "PNG", "WEBP")
_ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")
_QUARTER = {1: "ROTATE_90", 2: "ROTATE_180", 3: "ROTATE_270"}  # members of PIL's Image.Transpose
_FP_SIDE = 128  # fingerprint decodes keep at least this many pixels per side of the region
_HASH_MEMO_BYTES = 128 * 2**20  # b64/bytes values are memo keys, so their size counts
_FP_MEMO_BYTES = 32 * 2**20

Box = tuple[float, float, float, float]


# ---------------------------------------------------------------- pure helpers


def fit_size(w: int, h: int, max_side: int | None = None, max_pixels: int | None = None) -> tuple[int, int]:
    """Largest size <= (w, h) with the same aspect that fits both limits; never upscales."""
    if w < 1 or h < 1:
        raise EvalkitError(f"bad image size {w}x{h}")
    for name, limit in (("max_side", max_side), ("max_pixels", max_pixels)):
        if limit is not None and limit < 1:
            raise EvalkitError(f"{name} must be positive, got {limit}")
    s = 1.0
    if max_side:
        s = min(s, max_side / max(w, h))
    if max_pixels:
        s = min(s, math.sqrt(max_pixels / (w * h)))
    if s >= 1.0:
        return w, h
    nw, nh = max(1, round(w * s)), max(1, round(h * s))
    if max_side:  # float rounding must not overshoot the limit
        nw, nh = min(nw, max_side), min(nh, max_side)
    if max_pixels and nw * nh > max_pixels:
        if nw >= nh:
            nw = max(1, max_pixels // nh)
        else:
            nh = max(1, max_pixels // nw)
    return nw, nh


def rotate_image(img: Image.Image, degrees: float) -> Image.Image:
    """Rotate counter-clockwise with expand; quarter turns are exact transposes (no resampling)."""
    from PIL import Image

    d = degrees % 360
    if d == 0:
        return img
    if d % 90 == 0:
        return img.transpose(Image.Transpose[_QUARTER[int(d) // 90]])
    fill = "white" if img.mode in ("RGB", "L") else None
    return img.rotate(d, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=fill)


def to_rgb(img: Image.Image) -> Image.Image:
    """RGB as models expect: transparency composited on white, 16-bit scaled, palettes/CMYK converted."""
    import numpy as np
    from PIL import Image

    if img.mode in _ALPHA_MODES or "transparency" in img.info:
        rgba = img.convert("RGBA")
        out = Image.new("RGB", img.size, (255, 255, 255))
        out.paste(rgba, (0, 0), rgba)
        return out
    if img.mode == "RGB":
        return img
    if img.mode.startswith("I") or img.mode == "F":  # 16/32-bit and float data: scale, do not clip
        arr = np.asarray(img).astype(np.float32)
        top = float(arr.max()) if arr.size else 0.0
        if img.mode.startswith("I;16") or top > 255:
            arr = arr / 257.0
        elif img.mode == "F" and top <= 1.0:
            arr = arr * 255.0
        return Image.fromarray(np.clip(arr + 0.5, 0, 255).astype(np.uint8)).convert("RGB")
    return img.convert("RGB")


def encode(img: Image.Image, fmt: str, quality: int = 90) -> bytes:
    """Encode an RGB image as JPEG / PNG / WEBP."""
    buf = io.BytesIO()
    if fmt == "PNG":
        img.save(buf, "PNG", compress_level=3)  # output bytes are not part of any key: favour speed
    else:
        img.save(buf, fmt, quality=quality)
    return buf.getvalue()


def _norm_fmt(fmt: str | None) -> str | None:
    if fmt is None:
        return None
    f = fmt.upper().replace("JPG", "JPEG")
    if f not in _OUT_FORMATS:
        raise EvalkitError(f"unsupported image format {fmt!r} (use JPEG, PNG or WEBP)")
    return f


def _decode_errors() -> tuple[type[Exception], ...]:
    """What a failed decode raises, besides PIL's UnidentifiedImageError (an OSError)."""
    from PIL import Image

    return (OSError, ValueError, SyntaxError, EOFError, struct.error, Image.DecompressionBombError)


def _orientation(img: Image.Image) -> int:
    """EXIF orientation from the header only (a PNG's late eXIf chunk would force a full decode)."""
    if img.format == "PNG" and "exif" not in img.info:
        return 1
    return int(img.getexif().get(0x0112, 1) or 1)


def _unrotate_box(box: Box, quarter: int, w: int, h: int) -> Box:
    """Map a box in the image rotated by quarter*90 deg CCW back to the unrotated (w x h) image."""
    x0, y0, x1, y1 = box
    if quarter == 1:
        return (w - y1, x0, w - y0, x1)
    if quarter == 2:
        return (w - x1, h - y1, w - x0, h - y0)
    if quarter == 3:
        return (y0, h - x1, y1, h - x0)
    return box


def _decode(
    img: Image.Image, draft: Callable[[tuple[int, int]], tuple[int, int] | None]
) -> tuple[Image.Image, tuple[int, int], float]:
    """Decode an image from _lazy to oriented RGB -> (image, full oriented size, draft scale)."""
    from PIL import ImageOps

    orient = _orientation(img)
    swap = orient in (5, 6, 7, 8)
    full = (img.height, img.width) if swap else img.size
    scale = 1.0
    want = draft(full) if img.format in ("JPEG", "MPO") else None
    if want is not None:
        res = img.draft("RGB", (want[1], want[0]) if swap else want)
        if res is not None:
            scale = (full[1] if swap else full[0]) / res[1][2]
    img.load()
    if orient != 1:
        img = ImageOps.exif_transpose(img)
    return to_rgb(img), full, scale


# ---------------------------------------------------------------- values


