"""How fast `evalkit view` builds and opens a site at MME-RealWorld scale.

A synthetic MME-RealWorld set of 30,000 questions over a few hundred real-size JPEGs (1000x750,
noise and shapes) and three run directories written directly (records, summary, report and plots
as a run leaves them; answers in mixed styles, graded by the benchmark's own parser). Then:

- cold build: `evalkit view RUN RUN RUN --out SITE` in a fresh folder (every thumbnail made);
- warm build: the same command again (thumbnails exist; target < 10 s);
- first rows: headless Chromium opens SITE/index.html#view=samples from file:// and waits for the
  first table row (target < 2 s).

Each figure is printed with a ratio against a baseline measured in the same run: the builds
against a bare read of the same files (json.loads of every records line and of the question file,
the least any viewer must do), the first rows against Chromium opening a one-line local page.
Finally a screenshot of the samples page is saved to docs/view.png (--shot PATH to change).

    .venv/bin/python bench/view.py [--questions 30000] [--images 300] [--models 3] [--keep DIR]

Exits 0 when both targets are met. Needs Playwright (`pip install playwright`) and Chromium at
/usr/bin/chromium (or --chromium PATH).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
DOMAINS = [("Perception", "OCR with Complex Context", "license"), ("Perception", "Remote Sensing", "count"),
           ("Perception", "Diagram and Table", "diagram"), ("Perception", "Monitoring", "vehicle/counting"),
           ("Perception", "Autonomous Driving", "objects_identify"), ("Reasoning", "OCR with Complex Context",
                                                                       "scene_understanding"),
           ("Reasoning", "Diagram and Table", "diagram"), ("Reasoning", "Monitoring", "vehicle/attribute"),
           ("Reasoning", "Autonomous Driving", "intention")]
STYLES = ["{L}", "({L})", "The answer is ({L}).", "I would go with option {L}, {T}.",
          "Looking at the picture carefully, the best match is {T}.", "答案是 ({L})。图中可以看到相关细节。"]


def make_images(folder: Path, n: int) -> list[str]:
    """n distinct 1000x750 JPEGs (blurred noise and shapes, about 100-200 KB each)."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        rng = np.random.default_rng(i)
        img = Image.fromarray(rng.integers(0, 256, (750, 1000, 3), dtype=np.uint8)).filter(ImageFilter.GaussianBlur(2))
        draw = ImageDraw.Draw(img)
        for _ in range(10):
            x, y = int(rng.integers(0, 900)), int(rng.integers(0, 650))
            w, h = int(rng.integers(40, 300)), int(rng.integers(40, 300))
            fill = tuple(int(c) for c in rng.integers(0, 256, 3))
            (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x, y, x + w, y + h), fill=fill)
        name = f"images/img_{i:05d}.jpg"
        img.save(folder.parent / name, "JPEG", quality=85)
        names.append(name)
    return names


def make_questions(path: Path, n: int, images: list[str]) -> None:
    rng = random.Random(0)
    rows = []
    for i in range(n):
        task, subtask, cat = DOMAINS[i % len(DOMAINS)]
        k = rng.randrange(4, 60)
        choices = sorted({k, k + 3, k - 2, k * 2, k + 7} - {0})[:4]
        gold = rng.randrange(4)
        rows.append({"Question_id": f"{task.lower()}/{cat}/{i:05d}", "Image": images[i % len(images)],
                     "Text": f"How many objects of kind {i % 17} can be seen in this picture? (question {i})",
                     "Question type": "Multiple Choice",
                     "Answer choices": [f"({'ABCD'[j]}) {c}" for j, c in enumerate(choices)]
                     + ["(E) The image does not feature the objects"],
                     "Ground truth": "ABCD"[gold], "Task": task, "Subtask": subtask, "Category": cat})
    path.write_text(json.dumps(rows), encoding="utf-8")


def make_runs(data: Path, out: Path, n_models: int) -> list[Path]:
    """Run directories as `evalkit run` leaves them (records graded by the benchmark's official parser)."""
    from evalkit.benchmarks.prepare import prepare
    from evalkit.core.record import Record
    from evalkit.grading.grade import grade, summarize
    from evalkit.report.outputs import publish
    from evalkit.rundir.layout import RunDir

    opts = {"data": str(data)}
    bench, items, queries, *_ = prepare("mme-realworld", opts)
    fp = "".join(f"{(i * 37) % 256:02x}" for i in range(400))
    dirs = []
    for m in range(n_models):
        rng = random.Random(100 + m)
        p_right = 0.45 + 0.1 * m
        model = f"vllm/model-{'abc'[m % 3]}{m // 3 or ''}"
        records = []
        for q in queries:
            letter = q.gold if rng.random() < p_right else rng.choice([x for x in q.options if x != q.gold])
            text = rng.choice(STYLES).format(L=letter, T=q.options[letter])
            rec = Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant={}, model=model,
                         request_key=f"{m:02d}{q.id}", response=text, gold=q.gold, category=q.category,
                         prompt=q.prompt_text(), image_fps=[fp], image_sizes=[[1000, 750]],
                         usage={"input_tokens": 900, "output_tokens": len(text) // 3}, latency_s=rng.random(),
                         finish_reason="stop", cached=rng.random() < 0.1)
            records.append(grade(bench, q, rec, "official"))
        ident = {"benchmark": "mme-realworld", "endpoint": "http://127.0.0.1:1/v1", "identity_version": 1,
                 "model": model, "data_sha256": "0" * 64}
        rundir = RunDir(out / f"run-{m}")
        rundir.bind(ident, {**ident, "data": str(data), "images": None})
        rundir.rewrite_records(records)
        summary = summarize(bench, records, model=model, mode="official", n_items=len(items), n_queries=len(queries),
                            options=opts, config={**ident, "data": str(data)}, judge=None)
        publish(rundir, summary, bench, records, opts)
        dirs.append(rundir.path)
    return dirs


def bare_read(data: Path, runs: list[Path]) -> float:
    """The baseline: read and decode every file a viewer must read (question file, every records line)."""
    t0 = time.perf_counter()
    json.loads(data.read_text(encoding="utf-8"))
    for run in runs:
        with (run / "records.jsonl").open("rb") as f:
            for line in f:
                json.loads(line)
    return time.perf_counter() - t0


def build(runs: list[Path], site: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalkit.cli", "view", *map(str, runs), "--out", str(site)],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def browser_times(site: Path, chromium: str, shot: Path | None, tries: int = 3) -> tuple[float, float]:
    """(first rows, bare page): the best of `tries` fresh pages each."""
    from playwright.sync_api import sync_playwright

    bare = site.parent / "bare.html"
    bare.write_text("<!doctype html><meta charset=utf-8><p id=x>hello</p>", encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            rows, base = [], []
            for _ in range(tries):
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                t0 = time.perf_counter()
                page.goto(bare.as_uri())
                page.wait_for_selector("#x")
                base.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                page.goto(site.joinpath("index.html").as_uri() + "#view=samples")
                page.wait_for_selector("#rows li")
                rows.append(time.perf_counter() - t0)
                page.close()
            if shot is not None:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(site.joinpath("index.html").as_uri() + "#view=samples")
                page.wait_for_selector("#rows li")
                page.screenshot(path=str(shot))
        finally:
            browser.close()
    return min(rows), min(base)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=30000)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--models", type=int, default=3)
    ap.add_argument("--keep", help="make the data and runs in this folder and keep them (default: a temp folder)")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--shot", default=str(ROOT / "docs" / "view.png"), help="screenshot path ('' for none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalkit-view-bench-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        data = root / "mme" / "MME_RealWorld.json"
        t0 = time.perf_counter()
        images = make_images(root / "mme" / "images", args.images)
        make_questions(data, args.questions, images)
        runs = make_runs(data, root / "runs", args.models)
        print(f"made {args.questions:,} questions over {args.images} 1000x750 JPEGs and {args.models} runs "
              f"in {time.perf_counter() - t0:.0f} s")
        site = root / "site"
        if site.exists():
            import shutil

            shutil.rmtree(site)
        baseline = min(bare_read(data, runs) for _ in range(2))
        cold = build(runs, site)
        warm = min(build(runs, site) for _ in range(2))
        first, bare_page = browser_times(site, args.chromium, Path(args.shot) if args.shot else None)
    size = f"{args.questions:,} questions x {args.models} models"
    print(f"\n{size}:")
    print(f"  baseline: bare read of the records and questions  {baseline:6.2f} s")
    print(f"  cold build (thumbnails made)                     {cold:6.2f} s   {cold / baseline:5.1f}x baseline")
    print(f"  warm build (thumbnails exist)                    {warm:6.2f} s   {warm / baseline:5.1f}x baseline"
          f"   target < 10 s: {'ok' if warm < 10 else 'MISSED'}")
    print(f"  baseline: Chromium opens a one-line local page   {bare_page:6.2f} s")
    print(f"  first rows in headless Chromium                  {first:6.2f} s   {first / bare_page:5.1f}x baseline"
          f"   target < 2 s: {'ok' if first < 2 else 'MISSED'}")
    if args.shot:
        print(f"  screenshot: {args.shot}")
    return 0 if warm < 10 and first < 2 else 1


if __name__ == "__main__":
    sys.exit(main())
