"""TDBench grounding boxes: reading a model's box (relative or pixels, lenient about its spelling),
the gold box of a file, and the source size that turns pixels into relative coordinates."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.inline import inline_bytes
from evalkit.core.types import ImageRef

Box = tuple[float, float, float, float]
_NUM = re.compile(r"(?<![A-Za-z0-9_.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_GOLD_BOX = re.compile(r"^\s*[\[\(]?\s*([^\[\]\(\)]*?)\s*[\]\)]?\s*$")




def format_box(box: Sequence[float]) -> str:
    """A box as evalkit stores it: relative, rounded to 6 places, "[x1, y1, x2, y2]"."""
    return "[" + ", ".join(f"{round(float(v), 6):g}" for v in box) + "]"


def _normalise(vals: Sequence[float], size: tuple[int, int] | None) -> Box | None:
    if any(v < 0 for v in vals):
        return None
    if max(vals) > 1.0:  # pixels: only meaningful with the image size
        if size is None:
            return None
        w, h = size
        if vals[0] > w * 1.01 or vals[2] > w * 1.01 or vals[1] > h * 1.01 or vals[3] > h * 1.01:
            return None
        vals = [vals[0] / w, vals[1] / h, vals[2] / w, vals[3] / h]
    x1, x2 = sorted((min(vals[0], 1.0), min(vals[2], 1.0)))
    y1, y2 = sorted((min(vals[1], 1.0), min(vals[3], 1.0)))
    return x1, y1, x2, y2


def parse_box(text: str | None, size: tuple[int, int] | None = None) -> Box | None:
    """Four numbers from a reply: the first bracketed group of exactly four, else the only four.

    Relative values are taken as they are; values above 1 are pixels and need the image size
    (w, h) as sent; reversed corners are re-ordered. Anything else is None (unparsed).
    """
    if not text:
        return None
    groups = [g for g in re.findall(r"[\[\(]([^\[\]\(\)]*)[\]\)]", text)]
    vals: list[float] | None = None
    for g in groups:
        nums = [float(x) for x in _NUM.findall(g)]
        if len(nums) == 4:
            vals = nums
            break
    if vals is None:
        nums = [float(x) for x in _NUM.findall(text)]
        vals = nums if len(nums) == 4 else None
    return _normalise(vals, size) if vals else None


def box_values(text: str | None) -> Box | None:
    """The four numbers of a stored box ("[x1, y1, x2, y2]") as they are: no re-ordering, no range check.

    Answers are stored so (`format_box`); scoring reads them back with this, so a box the official
    reader took as given (corners reversed, a value above 1) is scored as VLMEvalKit scores it.
    """
    nums = [float(x) for x in _NUM.findall(text or "")]
    return (nums[0], nums[1], nums[2], nums[3]) if len(nums) == 4 else None


def parse_gold_box(text: str, where: str, size: tuple[int, int] | None) -> Box:
    """A box cell from the files: "[x1, y1, x2, y2]" (or "(...)", or bare numbers), relative or pixels."""
    m = _GOLD_BOX.match(text or "")
    parts = [p for p in re.split(r"[,\s]+", m.group(1)) if p] if m else []
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        vals = []
    box = _normalise(vals, size) if len(vals) == 4 else None
    if box is None or box[2] <= box[0] or box[3] <= box[1]:
        raise EvalkitError(f"{where}: unknown box format {text!r} (expected [x1, y1, x2, y2], relative in 0..1 "
                           f"or pixels within the image)")
    return box


def source_size(ref: ImageRef, deg: int = 0) -> tuple[int, int]:
    """(width, height) of an image after a counter-clockwise turn, from its header."""
    from PIL import Image

    if ref.kind == "path":
        src: Any = str(ref.value)
    else:
        src = io.BytesIO(inline_bytes(ref))
    with Image.open(src) as img:
        w, h = img.size
    return (h, w) if deg % 180 else (w, h)
