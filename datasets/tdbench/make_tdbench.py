"""Write the bundled TDBench sample: drawn top-down scenes in the official four-TSV form.

    python datasets/tdbench/make_tdbench.py [OUT_DIR] [--per-category N]

Draws scenes (grass, a road, coloured cars, trees), writes them as a *generated* set (JSONL with
image paths and placeholder tokens) in a temporary folder, then exports the official files
`tdbench_rot{0,90,180,270}.tsv` and `tdbench_grounding_rot*.tsv` with evalkit's own exporter.
Deterministic: the same arguments give the same files.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

from evalkit.benchmarks.readers.tdbench import export_official, load_generated

SIZE = 96
COLOURS = {"red": (220, 40, 40), "blue": (40, 70, 220), "yellow": (235, 210, 40), "white": (245, 245, 245)}
DIRS = ("top", "bottom", "left", "right")


def scene(rng: random.Random, cars: list[tuple[str, int, int, int]], trees: int = 3, road: bool = True
          ) -> Image.Image:
    """Grass, an optional road, a few trees, and cars as (colour, cx, cy, half-size) squares."""
    img = Image.new("RGB", (SIZE, SIZE), (70, 140, 60))
    d = ImageDraw.Draw(img)
    if road:
        d.rectangle((0, 40, SIZE, 56), fill=(90, 90, 90))
    for _ in range(trees):
        x, y = rng.randrange(6, SIZE - 6), rng.randrange(6, SIZE - 6)
        d.ellipse((x - 5, y - 5, x + 5, y + 5), fill=(20, 90, 30))
    for colour, cx, cy, s in cars:
        d.rectangle((cx - s, cy - s, cx + s, cy + s), fill=COLOURS[colour])
    return img


def cell_centre(row: int, col: int) -> tuple[int, int]:
    step = SIZE // 3
    return (col - 1) * step + step // 2, (row - 1) * step + step // 2


def items(rng: random.Random, folder: Path, per: int) -> list[dict]:
    out: list[dict] = []

    def save(img: Image.Image, name: str) -> str:
        img.save(folder / name)
        return name

    n = 0
    for _ in range(per):
        colours = rng.sample(list(COLOURS), 4)
        # Object Presence (yes/no: A and B only)
        present = rng.random() < 0.5
        cars = [(colours[0], 30, 30, 5)] if present else [(colours[1], 30, 30, 5)]
        out.append({"id": str(n := n + 1), "image": save(scene(rng, cars), f"{n}.png"), "category": "Object Presence",
                    "question": f"Is there a {colours[0]} car in the image?", "options": ["Yes", "No"],
                    "answer": "A" if present else "B"})
        # Object Localization (3x3 cell names re-rendered per rotation)
        r, c = rng.randrange(1, 4), rng.randrange(1, 4)
        cells = [(r, c)] + rng.sample([(i, j) for i in range(1, 4) for j in range(1, 4) if (i, j) != (r, c)], 3)
        out.append({"id": str(n := n + 1), "image": save(scene(rng, [(colours[0], *cell_centre(r, c), 6)], 2, False),
                                                         f"{n}.png"),
                    "category": "Object Localization", "question": f"In which cell of a 3x3 grid is the {colours[0]} car?",
                    "options": [f"<Cellname:{i},{j}>" for i, j in cells], "answer": "A"})
        # Spatial Relationship (direction words re-rendered per rotation)
        side = rng.choice(DIRS)
        dx, dy = {"top": (0, -1), "bottom": (0, 1), "left": (-1, 0), "right": (1, 0)}[side]
        cars = [(colours[1], 48, 48, 5), (colours[0], 48 + 28 * dx, 48 + 28 * dy, 5)]
        others = [x for x in DIRS if x != side]
        out.append({"id": str(n := n + 1), "image": save(scene(rng, cars, 2, False), f"{n}.png"),
                    "category": "Spatial Relationship",
                    "question": f"Where is the {colours[0]} car relative to the {colours[1]} car?",
                    "options": [f"<dir:{side}>", *(f"<dir:{x}>" for x in others)], "answer": "A"})
        # Object Counting
        k = rng.randrange(1, 5)
        cars = [(colours[0], 12 + 22 * i, 48, 4) for i in range(k)]
        out.append({"id": str(n := n + 1), "image": save(scene(rng, cars), f"{n}.png"), "category": "Object Counting",
                    "question": "How many cars are on the road?", "options": ["1", "2", "3", "4"],
                    "answer": "ABCD"[k - 1]})
        # Attribute Recognition
        out.append({"id": str(n := n + 1), "image": save(scene(rng, [(colours[2], 60, 20, 6)]), f"{n}.png"),
                    "category": "Attribute Recognition", "question": "What colour is the car?",
                    "options": colours, "answer": "ABCD"[2]})
        # Attribute Comparison
        big = rng.choice(colours[:2])
        cars = [(colours[0], 25, 25, 9 if big == colours[0] else 4), (colours[1], 70, 70, 9 if big == colours[1] else 4)]
        out.append({"id": str(n := n + 1), "image": save(scene(rng, cars), f"{n}.png"), "category": "Attribute Comparison",
                    "question": "Which car is larger?", "options": [f"the {colours[0]} car", f"the {colours[1]} car"],
                    "answer": "A" if big == colours[0] else "B"})
        # Scene Understanding
        road = rng.random() < 0.5
        out.append({"id": str(n := n + 1), "image": save(scene(rng, [], 6, road), f"{n}.png"),
                    "category": "Scene Understanding", "question": "What does this top-down image mainly show?",
                    "options": ["a road through a park", "a park without roads", "a beach", "a parking garage"],
                    "answer": "A" if road else "B"})
        # Hallucination Detection
        out.append({"id": str(n := n + 1), "image": save(scene(rng, [(colours[0], 20, 48, 5)]), f"{n}.png"),
                    "category": "Hallucination Detection", "question": "Which of these is NOT in the image?",
                    "options": ["a boat", "a tree", "a road", f"a {colours[0]} car"], "answer": "A"})
        # Dynamic Temporal: two images side by side, the car moves or not
        moved = rng.random() < 0.5
        a = scene(random.Random(n), [(colours[0], 20, 48, 5)])
        b = scene(random.Random(n), [(colours[0], 70 if moved else 20, 48, 5)])
        out.append({"id": str(n := n + 1), "images": [save(a, f"{n}a.png"), save(b, f"{n}b.png")], "layout": "h",
                    "category": "Dynamic Temporal", "question": f"Did the {colours[0]} car move between the two images?",
                    "options": ["Yes", "No"], "answer": "A" if moved else "B"})
        # Visual Grounding
        cx, cy = rng.randrange(15, 80), rng.randrange(15, 80)
        out.append({"id": str(n := n + 1), "image": save(scene(rng, [(colours[0], cx, cy, 7)], 2, False), f"{n}.png"),
                    "category": "Visual Grounding", "task": "grounding", "question": f"{colours[0]} car",
                    "box": [round((cx - 7) / SIZE, 4), round((cy - 7) / SIZE, 4),
                            round((cx + 8) / SIZE, 4), round((cy + 8) / SIZE, 4)]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(Path(__file__).resolve().parent))
    ap.add_argument("--per-category", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = items(rng, folder, args.per_category)
        (folder / "set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        written = export_official(load_generated(folder / "set.jsonl"), Path(args.out), seed=args.seed, size=256)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
