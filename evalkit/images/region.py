"""One decode of an image region: where rotate/crop/resize land in the source, planned before decoding.

The plan lets a big JPEG decode at reduced scale (Image.draft) when it will be downscaled anyway,
and makes crop+resize one resampling pass on the unrotated decode; quarter turns come last, on the
small result. Used by the pipeline for the bytes it sends and for fingerprints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Transform
from evalkit.images.ops import Box, _decode, _unrotate_box, fit_size, rotate_image

if TYPE_CHECKING:
    from PIL import Image


@dataclass(frozen=True)
class Plan:
    """Where rotate/crop/resize land in the oriented, unrotated source (so we resize before rotating)."""

    quarter: int  # CCW quarter turns
    box: Box  # crop in unrotated full-resolution coordinates
    target: tuple[int, int]  # output size in unrotated orientation

    def draft(self, full: tuple[int, int]) -> tuple[int, int] | None:
        """Smallest decode size that still gives the crop region at least the target resolution."""
        bw, bh = self.box[2] - self.box[0], self.box[3] - self.box[1]
        s = max(self.target[0] / bw, self.target[1] / bh)
        return None if s >= 1 else (max(1, math.ceil(full[0] * s)), max(1, math.ceil(full[1] * s)))


def plan(full: tuple[int, int], t: Transform, what: str) -> Plan:
    """The plan for transform `t` on a source of size `full`; a crop outside it names image `what`."""
    w, h = full
    quarter = (t.rotate % 360) // 90
    rw, rh = (h, w) if quarter % 2 else (w, h)
    x0, y0, x1, y1 = t.crop or (0, 0, rw, rh)
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(rw, x1), min(rh, y1)
    if x1 <= x0 or y1 <= y0:
        raise EvalkitError(f"crop {t.crop} is outside image {what} ({rw}x{rh})")
    tw, th = t.size or fit_size(x1 - x0, y1 - y0, t.max_side, t.max_pixels)
    box = _unrotate_box((x0, y0, x1, y1), quarter, w, h)
    return Plan(quarter, box, (th, tw) if quarter % 2 else (tw, th))


def decode_region(img: Image.Image, what: str, t: Transform,
                  shrink: Callable[[Plan], Plan] | None) -> tuple[Image.Image, int]:
    """Decode once and apply t's rotate/crop/resize -> (image, decoded pixels). `shrink` may lower
    the planned target (fingerprints need only a small region).

    Quarter turns are applied last, to the small result: the crop+resize is one resampling
    pass on the unrotated (possibly draft-reduced) decode.
    """
    if t.rotate % 90:  # arbitrary angle: rotate at full resolution first (rare, no draft)
        rgb, _, _ = _decode(img, lambda _f: None)
        pixels = rgb.width * rgb.height
        rgb = rotate_image(rgb, t.rotate)
        p = plan(rgb.size, replace(t, rotate=0), what)
        return _crop_resize(rgb, shrink(p) if shrink else p, 1.0), pixels
    plans: list[Plan] = []

    def want(full: tuple[int, int]) -> tuple[int, int] | None:
        p = plan(full, t, what)
        plans.append(shrink(p) if shrink else p)
        return plans[0].draft(full)

    rgb, full, scale = _decode(img, want)
    if not plans:
        want(full)
    out = _crop_resize(rgb, plans[0], scale)
    return rotate_image(out, plans[0].quarter * 90), rgb.width * rgb.height


def _crop_resize(rgb: Image.Image, p: Plan, scale: float) -> Image.Image:
    from PIL import Image

    box = tuple(v / scale for v in p.box)
    bw, bh = box[2] - box[0], box[3] - box[1]
    if scale == 1.0 and p.target == (bw, bh):
        return rgb if box == (0, 0, rgb.width, rgb.height) else rgb.crop(tuple(int(v) for v in box))
    return rgb.resize(p.target, Image.Resampling.LANCZOS, box=box, reducing_gap=3.0)
