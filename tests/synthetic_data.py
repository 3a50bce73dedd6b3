"""What test files import from the test tree's top: where the checkout and its test fixtures are, the
shared benchmark data, and synthetic MCQ datasets drawn here.

A test file imports these by name (`from synthetic_data import make_mcq_jsonl`): tests/ is on sys.path
(pyproject's `pythonpath`), and unlike `conftest`, whose module name each folder's conftest.py takes in
turn, this name is one module wherever the test file lives.
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path

from PIL import Image, ImageDraw

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
# The real benchmark files (question files, images, real model answers) where a checkout has them
# beside it; EVALKIT_SHARED_DATA points elsewhere. Tests that need them skip when they are absent.
SHARED_DATA = Path(os.environ.get("EVALKIT_SHARED_DATA") or REPO.parent / "shared" / "data")

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange", "cyan", "white"]


def draw_image(seed: int, size: int = 96) -> Image.Image:
    """A distinct picture per seed: background colour plus a few shapes."""
    rng = random.Random(seed)
    img = Image.new("RGB", (size, size), tuple(rng.randrange(256) for _ in range(3)))
    d = ImageDraw.Draw(img)
    for _ in range(4):
        x0, y0 = rng.randrange(size - 20), rng.randrange(size - 20)
        box = (x0, y0, x0 + rng.randrange(10, 40), y0 + rng.randrange(10, 40))
        fill = tuple(rng.randrange(256) for _ in range(3))
        (d.ellipse if rng.random() < 0.5 else d.rectangle)(box, fill=fill)
    return img


def make_mcq_jsonl(folder: Path, n: int, *, seed: int = 0, image_size: int = 96) -> Path:
    """n four-option questions over n distinct images, in evalkit's JSONL MCQ form."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "images").mkdir(exist_ok=True)
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        name = f"images/img{i:05d}.png"
        draw_image(seed * 100_003 + i, image_size).save(folder / name)
        colours = rng.sample(COLOURS, 4)
        answer = "ABCD"[rng.randrange(4)]
        lines.append({"id": f"q{i:05d}", "image": name, "question": f"Question {i % 7}: which colour dominates?",
                      "options": dict(zip("ABCD", colours, strict=True)), "answer": answer,
                      "category": f"cat{i % 3}"})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def colour_questions(folder: Path, n: int) -> Path:
    """n four-option questions, each on its own plain image of another size and colour (the tier tests' set:
    their costs and counts are computed from these sizes)."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        Image.new("RGB", (64 + 8 * i, 48), (40 * i % 256, 90, 200 - 10 * i)).save(folder / "images" / f"{i}.png")
        lines.append({"id": f"q{i}", "image": f"images/{i}.png", "question": f"Which colour is image {i}?",
                      "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "ABCD"[i % 4]})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def padded_jpeg(row: int, size: int) -> bytes:
    """A small JPEG padded with comment segments to about `size` bytes, distinct per row (data files of a
    known size, for tests that count the bytes a run reads)."""
    rng = random.Random(row)
    buf = io.BytesIO()
    Image.new("RGB", (48, 32), tuple(rng.randrange(256) for _ in range(3))).save(buf, "JPEG", quality=80)
    raw, segments, need = buf.getvalue(), [], size
    while need > 4:
        n = min(65533, need - 4)
        segments.append(b"\xff\xfe" + (n + 2).to_bytes(2, "big") + rng.randbytes(n))
        need -= n + 4
    return raw[:2] + b"".join(segments) + raw[2:]


MME_HEAD = ["index", "image", "question", "multi-choice options", *"ABCDE", "answer", "category", "l2-category"]


def mme_tsv(path: Path, rows: int, image_bytes: int, categories: Sequence[tuple[str, str]],
            answer_shift: int = 0) -> int:
    """MME-RealWorld's VLMEvalKit TSV of `rows` questions, each row's image a padded_jpeg inline in base64,
    the (category, l2-category) pairs taken in turn; returns the file's size."""
    lines = ["\t".join(MME_HEAD) + "\n"]
    for i in range(rows):
        category, l2 = categories[i % len(categories)]
        options = [str(i + k) for k in range(5)]
        lines.append("\t".join([str(i), base64.b64encode(padded_jpeg(i, image_bytes)).decode(), f"Question {i}?",
                                repr([f"({x}) {o}" for x, o in zip("ABCDE", options, strict=True)]), *options,
                                "ABCDE"[(i + answer_shift) % 5], category, l2]) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path.stat().st_size


def tdbench_set(folder: Path, n: int, *, seed: int = 0, size: int = 64, unique_text: bool = False,
                pairs: bool = True, grounding: bool = True) -> Path:
    """n problems in the generated form across categories, with direction placeholders."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    cats = ["Object Presence", "Spatial Relationship", "Object Localization", "Attribute Recognition"]
    lines = []
    for i in range(n):
        img = Image.new("RGB", (size, size), tuple(rng.randrange(256) for _ in range(3)))
        d = ImageDraw.Draw(img)
        for _ in range(3):
            x, y = rng.randrange(size - 16), rng.randrange(size - 16)
            d.rectangle((x, y, x + rng.randrange(4, 16), y + rng.randrange(4, 16)),
                        fill=tuple(rng.randrange(256) for _ in range(3)))
        d.rectangle((0, 0, 5, 5), fill=(255, 255, 255))
        img.save(folder / f"{i}.png")
        tag = f" (#{i})" if unique_text else ""
        kind = i % 6 if (pairs or grounding) else i % 4
        if kind == 4 and pairs:
            img.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(folder / f"{i}b.png")
            lines.append({"id": str(i), "images": [f"{i}.png", f"{i}b.png"], "layout": "h",
                          "category": "Dynamic Temporal", "question": f"Did anything change?{tag}",
                          "options": ["Yes", "No"], "answer": "A"})
        elif kind == 5 and grounding:
            lines.append({"id": str(i), "image": f"{i}.png", "task": "grounding", "category": "Visual Grounding",
                          "question": f"white square{tag}", "box": [0.0, 0.0, 0.1, 0.1]})
        else:
            lines.append({"id": str(i), "image": f"{i}.png", "category": cats[i % 4],
                          "question": f"Which side is the white square on?{tag}",
                          "options": ["<dir:top-left>", "<dir:top-right>", "<dir:bottom-left>", "<dir:bottom-right>"],
                          "answer": "A"})
    path = folder / "set.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def tiny_mcq_set(folder: Path, n: int, seed: int) -> Path:
    """n four-option questions in evalkit's JSONL form, three categories (cat0..cat2 in turn), a 16-px
    image each: many items cheaply, for the sampled-run tests."""
    folder.mkdir(parents=True, exist_ok=True)
    rng, rows = random.Random(seed), []
    for i in range(n):
        Image.new("RGB", (16, 16), (i % 256, i // 256 % 256, seed % 256)).save(folder / f"{i}.png")
        rows.append({"id": f"q{i:05d}", "image": f"{i}.png", "question": f"Question {i}: which colour dominates?",
                     "options": dict(zip("ABCD", ("red", "green", "blue", "grey"), strict=True)),
                     "answer": "ABCD"[rng.randrange(4)], "category": f"cat{i % 3}"})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def tiny_tdbench_set(folder: Path, n: int, *, unequal: bool = False) -> Path:
    """n TDBench problems in the generated form, four categories in turn (`unequal`: the last one gets 2/5
    of the items), a white square top-left to find: many problems cheaply, for the sampled-run tests."""
    folder.mkdir(parents=True, exist_ok=True)
    cats = ["Object Presence", "Spatial Relationship", "Object Localization", "Attribute Recognition"]
    rows = []
    for i in range(n):
        img = Image.new("RGB", (32, 32), (i % 256, 40, 90))
        ImageDraw.Draw(img).rectangle((0, 0, 5, 5), fill=(255, 255, 255))
        img.save(folder / f"{i}.png")
        rows.append({"id": str(i), "image": f"{i}.png", "category": cats[min(i % 5, 3) if unequal else i % 4],
                     "question": f"Which side is the white square on? (#{i})",
                     "options": ["<dir:top-left>", "<dir:top-right>", "<dir:bottom-left>", "<dir:bottom-right>"],
                     "answer": "A"})
    path = folder / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
