"""Write the bundled demo MCQ set: synthetic shape images, in VLMEvalKit TSV and JSONL form.

Run from anywhere: `python datasets/make_demo.py`. Output is deterministic (fixed seed, no
timestamps), so re-running it leaves the files unchanged.

Writes datasets/demo/mcq.tsv (base64 images), datasets/demo/mcq.jsonl and
datasets/demo/images/img_NN.png. 24 questions in 3 categories (colour, counting, position).
Rows 0 and 1 ask the same question with the same options about different images with
different answers; row 8 reuses row 2's image by putting "2" in its image cell.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import random
from pathlib import Path

from PIL import Image, ImageDraw

SIDE = 256
SEED = 20240611
COLOURS = {
    "red": (220, 40, 40),
    "blue": (40, 80, 220),
    "green": (40, 170, 70),
    "yellow": (235, 200, 30),
    "purple": (140, 60, 180),
    "orange": (245, 130, 30),
}
BACKGROUNDS = [(245, 245, 240), (230, 240, 250), (250, 235, 235), (235, 250, 235)]
SHAPES = ["circle", "square", "triangle", "diamond"]
LETTERS = "ABCD"
# Cell centres of a 3x3 grid, where shapes are placed so they never overlap.
GRID = [(48 + 80 * c, 48 + 80 * r) for r in range(3) for c in range(3)]
CORNERS = {"top-left": (64, 64), "top-right": (192, 64), "bottom-left": (64, 192), "bottom-right": (192, 192)}


def draw_shape(draw: ImageDraw.ImageDraw, shape: str, centre: tuple[int, int], size: int, fill: tuple) -> None:
    x, y = centre
    h = size // 2
    if shape == "circle":
        draw.ellipse((x - h, y - h, x + h, y + h), fill=fill)
    elif shape == "square":
        draw.rectangle((x - h, y - h, x + h, y + h), fill=fill)
    elif shape == "triangle":
        draw.polygon([(x, y - h), (x + h, y + h), (x - h, y + h)], fill=fill)
    elif shape == "diamond":
        draw.polygon([(x, y - h), (x + h, y), (x, y + h), (x - h, y)], fill=fill)
    else:
        raise ValueError(shape)


def canvas(rng: random.Random) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("RGB", (SIDE, SIDE), rng.choice(BACKGROUNDS))
    return img, ImageDraw.Draw(img)


def colour_image(rng: random.Random, circle: str, squares: int) -> Image.Image:
    """One circle of the asked colour plus `squares` squares in other colours."""
    img, draw = canvas(rng)
    cells = rng.sample(GRID, 1 + squares)
    draw_shape(draw, "circle", cells[0], 60, COLOURS[circle])
    others = [c for c in COLOURS if c != circle]
    for cell in cells[1:]:
        draw_shape(draw, "square", cell, 50, COLOURS[rng.choice(others)])
    return img


def count_image(rng: random.Random, squares: int) -> Image.Image:
    """`squares` squares of one colour and a circle as a distractor."""
    img, draw = canvas(rng)
    cells = rng.sample(GRID, squares + 1)
    colour = COLOURS[rng.choice(list(COLOURS))]
    for cell in cells[:squares]:
        draw_shape(draw, "square", cell, 50, colour)
    draw_shape(draw, "circle", cells[-1], 50, COLOURS[rng.choice(list(COLOURS))])
    return img


def position_image(rng: random.Random, layout: list[str]) -> Image.Image:
    """Four shapes, one per quadrant, in the order top-left, top-right, bottom-left, bottom-right."""
    img, draw = canvas(rng)
    for shape, centre in zip(layout, CORNERS.values(), strict=True):
        draw_shape(draw, shape, centre, 80, COLOURS[rng.choice(list(COLOURS))])
    return img


def build(rng: random.Random) -> list[dict]:
    """The 24 rows: dicts with index, image (PIL or an index it reuses), question, options, answer, category."""
    rows: list[dict] = []
    fixed_colour_options = ["red", "blue", "green", "yellow"]
    colour_specs = [("red", 1), ("blue", 2), ("green", 2), ("yellow", 0),
                    ("purple", 3), ("orange", 1), ("red", 2), ("blue", 1)]
    for i, (circle, squares) in enumerate(colour_specs):
        if i < 2:
            options = list(fixed_colour_options)  # rows 0 and 1: same question and options
        else:
            options = [circle, *rng.sample([c for c in COLOURS if c != circle], 3)]
            rng.shuffle(options)
        rows.append({"image": colour_image(rng, circle, squares), "question": "What colour is the circle?",
                     "options": options, "answer": LETTERS[options.index(circle)], "category": "colour"})
    count_options = ["1", "2", "3", "4"]
    for i, n in enumerate([2, 3, 1, 4, 2, 4, 3, 1]):
        if i == 0:
            image: object = 2  # reuse row 2's image (a green circle and 2 squares)
            n = colour_specs[2][1]
        else:
            image = count_image(rng, n)
        rows.append({"image": image, "question": "How many squares are there?", "options": count_options,
                     "answer": LETTERS[count_options.index(str(n))], "category": "counting",
                     "hint": "Count only squares, not circles." if i == 3 else ""})
    corners = list(CORNERS)
    for i in range(8):
        layout = rng.sample(SHAPES, 4)
        corner = corners[i % 4] if i >= 4 else "top-left"
        truth = layout[corners.index(corner)]
        options = rng.sample(SHAPES, 4)
        rows.append({"image": position_image(rng, layout), "question": f"Which shape is in the {corner}?",
                     "options": options, "answer": LETTERS[options.index(truth)], "category": "position"})
    for index, row in enumerate(rows):
        row["index"] = index
    return rows


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def main() -> None:
    out = Path(__file__).resolve().parent / "demo"
    (out / "images").mkdir(parents=True, exist_ok=True)
    rows = build(random.Random(SEED))
    encoded: dict[int, bytes] = {}
    for row in rows:
        if isinstance(row["image"], Image.Image):
            encoded[row["index"]] = png_bytes(row["image"])
            (out / "images" / f"img_{row['index']:02d}.png").write_bytes(encoded[row["index"]])

    with (out / "mcq.tsv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(["index", "image", "question", "A", "B", "C", "D", "answer", "category", "hint"])
        for row in rows:
            image = row["image"]
            cell = str(image) if isinstance(image, int) else base64.b64encode(encoded[row["index"]]).decode()
            writer.writerow([row["index"], cell, row["question"], *row["options"], row["answer"],
                             row["category"], row.get("hint", "")])

    with (out / "mcq.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            source = row["image"] if isinstance(row["image"], int) else row["index"]
            obj = {"id": str(row["index"]), "image": f"images/img_{source:02d}.png", "question": row["question"],
                   "options": dict(zip(LETTERS, row["options"], strict=True)), "answer": row["answer"],
                   "category": row["category"]}
            if row.get("hint"):
                obj["hint"] = row["hint"]
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {len(rows)} questions, {len(encoded)} images to {out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
