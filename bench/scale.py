"""MME-RealWorld at scale: many questions on few high-resolution JPEGs, memory and decodes counted.

Writes (once, reused from --workdir) --images distinct JPEGs of --size pixels and an official
MME_RealWorld.json with --items questions over them (--items / --images per picture, all five
domains, both tasks). The simulated server runs in its own process with the answer key built
from that file. The evaluation runs in a child process (`evalkit.run_async("mme-realworld",
"vllm/sim-model", max_side=...)`), so its peak RSS is its own: read with os.wait4. The child
counts the image pipeline's work (full decodes, fingerprint decodes, memo hits) and, in a second
child, the memory that materialising the query list costs (tracemalloc over load + expand).

    .venv/bin/python bench/scale.py [--items 3000] [--images 300] [--size 4000x3000]
        [--max-side 2048] [--concurrency 32] [--workdir DIR] [--rss-limit-mb 600]

Targets: peak RSS of the run < --rss-limit-mb; full decodes == number of distinct images;
every query answered, accuracy 100 (the simulated model is perfect). Exit 0 when all are met.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from _common import SimProcess, env_without_keys
from PIL import Image, ImageDraw, ImageFilter

HERE = Path(__file__).resolve().parent
CELLS = [  # (Task, Subtask, Category) in the official spellings
    ("Perception", "OCR with Complex Context", "license"),
    ("Perception", "Remote Sensing", "count"),
    ("Perception", "Diagram and Table", "diagram"),
    ("Perception", "Monitoring", "Vehicle/counting"),
    ("Perception", "Autonomous_Driving", "Objects_Identify"),
    ("Reasoning", "OCR with Complex Context", "scene_understanding"),
    ("Reasoning", "Diagram and Table", "diagram"),
    ("Reasoning", "Monitoring", "Vehicle/attribute/intention"),
    ("Reasoning", "Autonomous_Driving", "Intention"),
]


# ------------------------------------------------------------------ the data set


def draw_jpeg(args: tuple[str, int, int, int]) -> int:
    """One photo-like high-resolution JPEG: a blurred random field scaled up, shapes, fine noise."""
    path, w, h, seed = args
    rng = random.Random(seed)
    small = Image.frombytes("RGB", (w // 40, h // 40), rng.randbytes((w // 40) * (h // 40) * 3))
    img = small.filter(ImageFilter.GaussianBlur(2)).resize((w, h), Image.Resampling.BILINEAR)
    d = ImageDraw.Draw(img)
    for _ in range(40):
        x, y, r = rng.randrange(w), rng.randrange(h), rng.randrange(h // 60, h // 8)
        fill = tuple(rng.randrange(256) for _ in range(3))
        (d.ellipse if rng.random() < 0.5 else d.rectangle)((x - r, y - r, x + r, y + r), fill=fill)
    noise = Image.effect_noise((w, h), 24).convert("RGB")
    img = Image.blend(img, noise, 0.12)
    img.save(path, "JPEG", quality=90)
    return os.path.getsize(path)


def build_dataset(folder: Path, n_items: int, n_images: int, size: tuple[int, int]) -> Path:
    """The JPEGs (skipped when already there) and MME_RealWorld.json; returns the JSON path."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    todo = [(str(folder / "images" / f"hr_{k:04d}.jpg"), size[0], size[1], 1000 + k) for k in range(n_images)]
    todo = [t for t in todo if not Path(t[0]).exists()]
    if todo:
        t0 = time.monotonic()
        with ProcessPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:
            total = sum(pool.map(draw_jpeg, todo))
        print(f"drew {len(todo)} JPEGs of {size[0]}x{size[1]} ({total / len(todo) / 1e6:.2f} MB each) "
              f"in {time.monotonic() - t0:.0f}s")
    rng = random.Random(7)
    records = []
    for i in range(n_items):
        k = i * n_images // n_items  # consecutive questions share a picture, as in the real files
        task, subtask, category = CELLS[k % len(CELLS)]
        numbers = rng.sample(range(1, 100), 4)
        records.append({
            "Question_id": f"{task.lower()}/scale/{category}/{i:05d}",
            "Image": f"images/hr_{k:04d}.jpg",
            "Text": f"Question {i}: what is the number of objects of kind {i % 97} in the image?",
            "Question Type": "Multiple Choice",
            "Answer choices": [f"({chr(65 + j)}) {v}" for j, v in enumerate(numbers)]
                              + ["(E) The image does not feature the objects"],
            "Ground truth": "ABCDE"[rng.randrange(5)],
            "Task": task, "Subtask": subtask, "Category": category,
        })
    path = folder / "MME_RealWorld.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


# ------------------------------------------------------------------ the child process


def child(spec: dict[str, Any]) -> None:
    """Runs inside the measured process: one evalkit run, or the query-list measurement."""
    import asyncio
    import resource
    import tracemalloc

    import evalkit.engine.evaluate as ev
    from evalkit.benchmarks.prepare import prepare
    from evalkit.images.pipeline import ImagePipeline

    if spec["what"] == "queries":
        tracemalloc.start()
        _, items, queries, *_ = prepare("mme-realworld", {"data": spec["data"],
                                                            "max_side": spec["max_side"]})
        _, peak = tracemalloc.get_traced_memory()
        print(json.dumps({"queries": len(queries), "items": len(items), "peak_bytes": peak}))
        return

    pipelines: list[ImagePipeline] = []

    class CountingPipeline(ImagePipeline):  # the run's own pipeline, kept so its counters can be read
        def __init__(self, *a: Any, **kw: Any) -> None:
            if spec.get("memo_mb"):  # what-if: the memo bound evaluate.run_async would pass (see README)
                kw["max_bytes"] = int(spec["memo_mb"] * 2**20)
            super().__init__(*a, **kw)
            pipelines.append(self)

    ev.ImagePipeline = CountingPipeline  # type: ignore[misc]
    t0 = time.monotonic()
    res = asyncio.run(ev.run_async(
        "mme-realworld", "vllm/sim-model", data=spec["data"], base_url=spec["url"], out=spec["out"],
        no_cache=True, progress=False, concurrency=spec["concurrency"], max_side=spec["max_side"],
        env={**env_without_keys(), "OPENAI_API_KEY": "sk-sim-bench"},
    ))
    elapsed = time.monotonic() - t0
    stats = pipelines[0].stats.to_dict() if pipelines else {}
    sizes = {tuple(s) for r in res.records for s in r.image_sizes}
    print(json.dumps({
        "elapsed_s": elapsed, "exit_code": res.exit_code, "n_queries": res.summary["n_queries"],
        "counts": res.summary["counts"], "avg": res.summary["metrics"]["Avg"], "stats": stats,
        "sizes_sent": sorted(sizes), "maxrss_kb_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))


def run_child(spec: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any], int]:
    """(the child's JSON line, its own peak RSS in KB from wait4)."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                            cwd=str(HERE.parent), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"child did not finish within {timeout_s:.0f}s")
            time.sleep(0.2)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"child failed ({proc.returncode}): {err.strip()[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss


# ------------------------------------------------------------------ main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--size", default="4000x3000")
    ap.add_argument("--max-side", type=int, default=2048)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--workdir", help="where the JPEGs and the JSON are kept (default: a folder in /tmp)")
    ap.add_argument("--rss-limit-mb", type=float, default=600.0)
    ap.add_argument("--memo-mb", type=float, default=None,
                    help="what-if: bound the run's prepared-image memo to N MB (default: evalkit's own, 256)")
    ap.add_argument("--timeout", type=float, default=900.0, help="the run is abandoned after this many seconds")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return 0

    w, h = (int(x) for x in args.size.lower().split("x"))
    work = Path(args.workdir or Path(tempfile.gettempdir()) / f"evalkit-scale-{w}x{h}-{args.images}")
    data = build_dataset(work, args.items, args.images, (w, h))
    source_mb = sum(p.stat().st_size for p in (work / "images").glob("hr_*.jpg")) / 1e6

    q, q_rss = run_child({"what": "queries", "data": str(data), "max_side": args.max_side}, args.timeout)
    print(f"load + expand of {q['queries']} queries: {q['peak_bytes'] / 1e6:.1f} MB traced "
          f"({q['peak_bytes'] / max(1, q['queries']):.0f} B per query), process peak RSS {q_rss / 1024:.0f} MB")

    t0 = time.monotonic()
    with SimProcess("--bench", "mme-realworld", "--data", str(data), "--theta", "1", "--r", "1",
                    startup_s=args.timeout) as sim:
        print(f"simulated server ready in {time.monotonic() - t0:.0f}s (answer key of {args.items} questions)")
        with tempfile.TemporaryDirectory(prefix="evalkit-scale-run-") as out:
            r, rss_kb = run_child({"what": "run", "data": str(data), "url": sim.url, "out": out + "/run",
                                   "concurrency": args.concurrency, "max_side": args.max_side,
                                   "memo_mb": args.memo_mb}, args.timeout)
        served = sim.counters()

    st = r["stats"]
    rss_mb = rss_kb / 1024
    answered = r["counts"]["correct"] + r["counts"]["wrong"] + r["counts"]["unparsed"] + r["counts"]["refusals"]
    checks = [
        ("peak RSS of the run (MB)", f"{rss_mb:.0f}", f"< {args.rss_limit_mb:.0f}", rss_mb < args.rss_limit_mb),
        ("full decodes", st.get("decodes"), f"== {args.images}", st.get("decodes") == args.images),
        ("queries answered", answered, f"== {args.items}", answered == args.items and r["counts"]["errors"] == 0),
        ("Avg (perfect model)", f"{r['avg']:.1f}", "== 100", r["avg"] == 100.0),
    ]
    print(f"\n{args.items} questions on {args.images} JPEGs of {w}x{h} ({source_mb:.0f} MB on disk), "
          f"--max-side {args.max_side}, {args.concurrency} in flight")
    print(f"run: {r['elapsed_s']:.1f}s ({args.items / r['elapsed_s']:.0f} q/s); sent sizes {r['sizes_sent']}; "
          f"server completions {served.get('completions')}")
    print(f"pipeline: decodes {st.get('decodes')}, decoded pixels/decode "
          f"{st.get('decoded_pixels', 0) / max(1, st.get('decodes', 1)) / 1e6:.1f} MP, fingerprint decodes "
          f"{st.get('fp_decodes')}, memo hits {st.get('memo_hits')}, misses {st.get('memo_misses')}, "
          f"evictions {st.get('evictions')}, memo bytes {st.get('memo_bytes', 0) / 1e6:.0f} MB")
    print(f"\n{'figure':28} {'value':>8}  {'target':>10}")
    for name, value, target, ok in checks:
        print(f"{name:28} {value!s:>8}  {target:>10} {'ok' if ok else 'MISSED'}")
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
