"""Write the bundled POPE sample: a few drawn scenes and yes/no object questions over three splits.

Run from anywhere: `python datasets/pope/make_sample.py`. Deterministic (no randomness beyond a
fixed seed), so re-running leaves the files unchanged. Writes next to this script:

  pope_sample.jsonl   24 questions in the official POPE form (question_id, image, text, label)
                      plus a `category` naming the split
  images/scene*.png   4 small pictures, each showing 3 simple objects on a 2x2 grid

Like POPE, every split asks about objects that are in the picture (label "yes") and objects
that are not ("no"), and the splits differ in how the absent object is chosen:

  random       any object not in the picture (seeded choice)
  popular      the absent object shown most often in the other pictures
  adversarial  the absent object that co-occurs most with the objects in this picture

Each scene gets one yes and one no question per split (a different present object per split),
so the sample is balanced: 12 yes, 12 no, 8 questions per split.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
SEED = 20230510
SIZE = 96  # pixels; four 48-pixel cells
SPLITS = ("random", "popular", "adversarial")

# What each picture shows (cell order: top-left, top-right, bottom-left, bottom-right; None = empty).
SCENES = [
    ("ball", "box", None, "tree"),
    ("tree", None, "house", "sun"),
    ("car", "house", "tree", None),
    (None, "ball", "car", "sun"),
]
# Objects never drawn: only ever asked about (and then the answer is no).
NEVER_SHOWN = ("cup", "fish", "boat", "umbrella")


def _draw_object(d: ImageDraw.ImageDraw, name: str, x: int, y: int, s: int) -> None:
    """One object in the s x s cell at (x, y)."""
    m = s // 8
    if name == "ball":
        d.ellipse((x + 2 * m, y + 2 * m, x + s - 2 * m, y + s - 2 * m), fill=(220, 40, 40), outline=(90, 0, 0))
    elif name == "box":
        d.rectangle((x + 2 * m, y + 2 * m, x + s - 2 * m, y + s - 2 * m), fill=(170, 110, 50), outline=(80, 50, 20))
        d.line((x + 2 * m, y + s // 2, x + s - 2 * m, y + s // 2), fill=(80, 50, 20))
    elif name == "tree":
        d.rectangle((x + s // 2 - m // 2, y + s - 3 * m, x + s // 2 + m // 2, y + s - m), fill=(110, 70, 30))
        d.polygon([(x + s // 2, y + m), (x + m, y + s - 3 * m), (x + s - m, y + s - 3 * m)], fill=(30, 140, 50))
    elif name == "house":
        d.rectangle((x + 2 * m, y + s // 2, x + s - 2 * m, y + s - m), fill=(230, 220, 190), outline=(60, 60, 60))
        d.polygon([(x + m, y + s // 2), (x + s // 2, y + m), (x + s - m, y + s // 2)], fill=(180, 40, 40))
        d.rectangle((x + s // 2 - m // 2, y + s - 3 * m, x + s // 2 + m // 2, y + s - m), fill=(90, 60, 30))
    elif name == "sun":
        c, r = (x + s // 2, y + s // 2), s // 5
        for k in range(8):
            dx, dy = [(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)][k]
            d.line((c[0], c[1], c[0] + dx * (r + 2 * m), c[1] + dy * (r + 2 * m)), fill=(240, 180, 0), width=2)
        d.ellipse((c[0] - r, c[1] - r, c[0] + r, c[1] + r), fill=(250, 210, 0))
    elif name == "car":
        d.rectangle((x + m, y + s // 2 - m, x + s - m, y + s - 3 * m), fill=(40, 80, 200))
        d.rectangle((x + 3 * m, y + s // 2 - 3 * m, x + s - 3 * m, y + s // 2 - m), fill=(80, 120, 230))
        for cx in (x + 5 * m // 2, x + s - 5 * m // 2):
            d.ellipse((cx - m, y + s - 4 * m, cx + m, y + s - 2 * m), fill=(20, 20, 20))
    else:
        raise ValueError(f"no drawing for {name!r}")


def draw_scene(cells: tuple[str | None, ...]) -> Image.Image:
    img = Image.new("RGB", (SIZE, SIZE), (235, 240, 245))
    d = ImageDraw.Draw(img)
    half = SIZE // 2
    for k, name in enumerate(cells):
        if name is not None:
            _draw_object(d, name, (k % 2) * half, (k // 2) * half, half)
    return img.quantize(colors=32)  # a small palette PNG: the sample stays a few KB


def _article(name: str) -> str:
    return "an" if name[0] in "aeiou" else "a"


def build_questions() -> list[dict[str, object]]:
    """The sample's rows, in file order: scene by scene, split by split, yes before no."""
    rng = random.Random(SEED)
    shown = [[o for o in cells if o] for cells in SCENES]
    vocabulary = sorted({o for objs in shown for o in objs} | set(NEVER_SHOWN))
    frequency = Counter(o for objs in shown for o in objs)
    rows: list[dict[str, object]] = []
    for i, objs in enumerate(shown):
        absent = [o for o in vocabulary if o not in objs]
        others = [other for j, other in enumerate(shown) if j != i]
        co = Counter(o for other in others if set(other) & set(objs) for o in other if o not in objs)
        used: set[str] = set()
        for k, split in enumerate(SPLITS):
            pool = [o for o in absent if o not in used] or absent
            if split == "random":
                negative = rng.choice(pool)
            elif split == "popular":
                negative = max(pool, key=lambda o: (frequency[o], o))
            else:
                negative = max(pool, key=lambda o: (co[o], frequency[o], o))
            used.add(negative)
            for obj, label in ((objs[k % len(objs)], "yes"), (negative, "no")):
                rows.append({"question_id": len(rows), "image": f"images/scene{i}.png",
                             "text": f"Is there {_article(obj)} {obj} in the image?", "label": label,
                             "category": split})
    return rows


def main() -> None:
    (HERE / "images").mkdir(exist_ok=True)
    for i, cells in enumerate(SCENES):
        draw_scene(cells).save(HERE / "images" / f"scene{i}.png", optimize=True)
    rows = build_questions()
    (HERE / "pope_sample.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} questions over {len(SCENES)} images to {HERE}")


if __name__ == "__main__":
    main()
