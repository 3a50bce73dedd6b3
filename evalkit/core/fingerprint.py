"""Image fingerprints that survive resizing and re-encoding.

The simulated model must tell apart two items with the same question on different
images, after evalkit has resized and re-encoded them. A 16x16 grayscale thumbnail,
compared by mean absolute difference, does that: resizing and JPEG barely move it,
a different picture moves it a lot. Rotation and cropping do change it, as they should.
"""

from __future__ import annotations

import io

from PIL import Image, ImageOps

SIDE = 16


def fingerprint_image(img: Image.Image) -> str:
    """Hex string of the 16x16 grayscale thumbnail (256 bytes -> 512 hex chars)."""
    small = img.convert("L").resize((SIDE, SIDE), Image.Resampling.BOX)
    return small.tobytes().hex()


def fingerprint_bytes(data: bytes) -> str:
    """Fingerprint of encoded image bytes, honouring EXIF orientation like the image pipeline."""
    with Image.open(io.BytesIO(data)) as img:
        img.draft("L", (SIDE * 8, SIDE * 8))  # fast path for big JPEGs
        return fingerprint_image(ImageOps.exif_transpose(img))


def distance(a: str, b: str) -> float:
    """Mean absolute grey-level difference (0..255) between two fingerprints."""
    ba, bb = bytes.fromhex(a), bytes.fromhex(b)
    if len(ba) != len(bb):
        return 255.0
    return sum(abs(x - y) for x, y in zip(ba, bb, strict=True)) / len(ba)
