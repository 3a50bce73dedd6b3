"""Shared fixtures: synthetic MCQ datasets drawn here, and the simulated server."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

REPO = Path(__file__).resolve().parents[1]
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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"real benchmark data not present at {SHARED_DATA}")
    return SHARED_DATA
