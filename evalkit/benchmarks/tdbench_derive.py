"""Case-study tools (TDBench paper §5.1, §5.3): derive a new dataset from boxed objects.

    evalkit derive magnify   --data SET.jsonl --out DIR --area-ratio 0.02
    evalkit derive integrity --data SET.jsonl --out DIR --integrity 0.6 [--scale 25]

Input: the generated TDBench form (JSONL) with grounding items ("task": "grounding", the object
name as "question", a relative "box"). Output: a generated-form object-presence set
(`DIR/set.jsonl` + PNG crops) that `evalkit run tdbench --data DIR` evaluates, each line
carrying the achieved area ratio / integrity.

* magnify: crop around the box (keeping the image's aspect ratio) so the box covers
  `area_ratio` of the crop; the crop slides to stay inside the image.
* integrity: a fixed-size crop (`scale` times the box area, the paper's AR) slid off the box
  so that `integrity` of the box area stays inside the crop.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError

PixBox = tuple[int, int, int, int]


@dataclass(frozen=True)
class Crop:
    box: PixBox  # the crop, in source pixels
    ratio: float  # visible box area / crop area
    integrity: float  # visible box area / box area


def _clamp_span(lo: float, length: int, limit: int) -> int:
    """Left/top edge of a span of `length` starting near lo, slid to stay within 0..limit."""
    return int(min(max(round(lo), 0), limit - length))


def _measure(crop: PixBox, box: tuple[float, float, float, float]) -> Crop:
    ix = max(0.0, min(crop[2], box[2]) - max(crop[0], box[0]))
    iy = max(0.0, min(crop[3], box[3]) - max(crop[1], box[1]))
    area = (box[2] - box[0]) * (box[3] - box[1])
    return Crop(crop, ix * iy / ((crop[2] - crop[0]) * (crop[3] - crop[1])), ix * iy / area)


def magnify_crop(size: tuple[int, int], box: tuple[float, float, float, float], area_ratio: float) -> Crop:
    """The crop (in pixels) where a pixel box covers `area_ratio` of the area; an error if impossible."""
    w, h = size
    bw, bh = box[2] - box[0], box[3] - box[1]
    if not 0 < area_ratio <= 1 or bw <= 0 or bh <= 0:
        raise EvalkitError(f"area ratio must be in (0, 1] and the box non-empty (got {area_ratio}, {box})")
    area = bw * bh / area_ratio
    cw = math.sqrt(area * w / h)
    ch = area / cw
    if cw < bw:
        cw, ch = bw, area / bw
    if ch < bh:
        ch, cw = bh, area / bh
    cw_i, ch_i = round(cw), round(ch)
    if cw_i > w or ch_i > h or cw_i < bw or ch_i < bh:
        raise EvalkitError(f"cannot reach area ratio {area_ratio:g} for a {bw:g}x{bh:g} box in a {w}x{h} image")
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    x0, y0 = _clamp_span(cx - cw_i / 2, cw_i, w), _clamp_span(cy - ch_i / 2, ch_i, h)
    return _measure((x0, y0, x0 + cw_i, y0 + ch_i), box)


def integrity_crop(size: tuple[int, int], box: tuple[float, float, float, float], integrity: float,
                   scale: float = 25.0) -> Crop:
    """A crop of `scale` x the box area (box's aspect) slid sideways so `integrity` of the box stays in."""
    w, h = size
    bw, bh = box[2] - box[0], box[3] - box[1]
    if not 0 < integrity <= 1 or scale < 1:
        raise EvalkitError(f"integrity must be in (0, 1] and scale >= 1 (got {integrity}, {scale})")
    cw, ch = round(bw * math.sqrt(scale)), round(bh * math.sqrt(scale))
    if cw > w or ch > h:
        raise EvalkitError(f"a crop {scale:g}x the box ({cw}x{ch}) does not fit in the {w}x{h} image")
    cy = _clamp_span((box[1] + box[3]) / 2 - ch / 2, ch, h)
    cx = _clamp_span((box[0] + box[2]) / 2 - cw / 2, cw, w)
    keep = integrity * bw
    candidates = [  # crop edge cutting the box: right edge, left edge (then the same vertically)
        ((round(box[0] + keep) - cw, cy), "x"),
        ((round(box[2] - keep), cy), "x"),
        ((cx, round(box[1] + integrity * bh) - ch), "y"),
        ((cx, round(box[3] - integrity * bh)), "y"),
    ]
    for (x0, y0), _axis in candidates:
        if x0 >= 0 and y0 >= 0 and x0 + cw <= w and y0 + ch <= h:
            return _measure((int(x0), int(y0), int(x0) + cw, int(y0) + ch), box)
    raise EvalkitError(f"no crop position leaves {integrity:.0%} of the box {box} inside a {w}x{h} image")


def safe_name(item_id: str) -> str:
    """A file name from a dataset id that stays inside --out: ids are data, and an absolute or `../`
    id must not choose where a file is written. An id that had to change gets a short hash of itself,
    so two ids never share a file."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", item_id).lstrip(".")[:100]
    if name == item_id and name:
        return name
    return f"{name or 'item'}-{hashlib.sha256(item_id.encode()).hexdigest()[:8]}"


def derive(kind: str, data: Path, out: Path, *, area_ratio: float = 0.02, integrity: float = 0.6,
           scale: float = 25.0, images: Path | None = None) -> dict[str, Any]:
    """Write the derived set; returns counts (written, skipped with reasons)."""
    from PIL import Image

    from evalkit.benchmarks.readers.tdbench import load_generated

    items = [it for it in load_generated(data, images) if it.meta.get("task") == "grounding"]
    if not items:
        raise EvalkitError(f"{data}: no grounding items (\"task\": \"grounding\" with a \"box\") to derive from")
    out.mkdir(parents=True, exist_ok=True)
    lines, skipped = [], []
    for it in items:
        with Image.open(str(it.images[0].value)) as img:
            img.load()
            w, h = img.size
            rel = it.meta["box"]
            box = (rel[0] * w, rel[1] * h, rel[2] * w, rel[3] * h)
            try:
                crop = (magnify_crop((w, h), box, area_ratio) if kind == "magnify"
                        else integrity_crop((w, h), box, integrity, scale))
            except EvalkitError as exc:
                skipped.append(f"{it.id}: {exc}")
                continue
            name = f"{safe_name(it.id)}_{kind}.png"
            img.convert("RGB").crop(crop.box).save(out / name)
        lines.append({"id": it.id, "image": name, "category": "Object Presence",
                      "question": f"Is there a {it.question} in the image?", "options": ["Yes", "No"],
                      "answer": "A", "shuffle": False,
                      "area_ratio": round(crop.ratio, 6), "integrity": round(crop.integrity, 6)})
    (out / "set.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return {"written": len(lines), "skipped": skipped, "out": str(out / "set.jsonl")}


def add_derive_parser(sub: Any) -> None:
    """`evalkit derive magnify|integrity` (registered by the CLI)."""
    p = sub.add_parser("derive", help="case-study datasets: digital magnification or object integrity crops")
    p.add_argument("kind", choices=("magnify", "integrity"), help="magnify: crops around each box (digital "
                   "magnification); integrity: fixed-size crops that keep only part of the object")
    p.add_argument("--data", required=True, help="generated TDBench JSONL with grounding items")
    p.add_argument("--images", help="folder the image paths are relative to")
    p.add_argument("--out", required=True, help="folder for set.jsonl and the crops")
    p.add_argument("--area-ratio", type=float, default=0.02, help="magnify: box area / crop area (default 0.02)")
    p.add_argument("--integrity", type=float, default=0.6, help="integrity: share of the box kept (default 0.6)")
    p.add_argument("--scale", type=float, default=25.0, help="integrity: crop area / box area, the paper's AR")


def cmd_derive(args: argparse.Namespace, console: Any) -> int:
    result = derive(args.kind, Path(args.data), Path(args.out), area_ratio=args.area_ratio,
                    integrity=args.integrity, scale=args.scale, images=Path(args.images) if args.images else None)
    console.print(f"wrote {result['written']} items to {result['out']}")
    for reason in result["skipped"]:
        console.print(f"[yellow]skipped {reason}[/yellow]")
    return 0
