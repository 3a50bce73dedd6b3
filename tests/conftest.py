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

# One OpenBLAS thread, as the `evalkit` command sets (evalkit.cli._one_blas_thread), for the workers'
# in-process runs and every child they start: set before numpy is first imported
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

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


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """run() retries with a 10 ms backoff ceiling doubling to 0.2 s instead of 0.5 s to 20 s.

    The attempts, what is retried and the Retry-After pauses are unchanged; only the jittered
    sleeps between attempts shrink (run() has no backoff option, so its RetryPolicy is wrapped)."""
    import functools

    from evalkit.ask.retry import RetryPolicy

    monkeypatch.setattr("evalkit.engine.endpoints.wiring.RetryPolicy",
                        functools.partial(RetryPolicy, initial_s=0.01, max_s=0.2))


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs plan their figures (report.md names them as usual) but draw none: for tests that look at
    metrics, counts and requests only. Every figure is still drawn from real runs' data in
    test_plots, test_run_report, test_compare, test_compare_real and each benchmark's sample runs."""
    from evalkit.report import figures

    def planned_only(plot_dir: Path, results, **_: object) -> list[tuple[str, Path]]:
        return [(f.title, f.path) for f in figures.plan_figures(Path(plot_dir), results)]

    monkeypatch.setattr(figures, "draw_all", planned_only)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"real benchmark data not present at {SHARED_DATA}")
    return SHARED_DATA

