"""MME-RealWorld's base64 release at full size: memory and start-up of `evalkit run` on gigabytes of data.

Writes (into --workdir, else a temporary folder removed at the end) a --rows question set whose
images are real small JPEGs (varied shapes and colours) padded with comment segments to about
--image-kb each (every row's bytes distinct), in both layouts evalkit reads:

  json/  a Hub-snapshot-shaped folder: MME-RealWorld/MME_RealWorld_base64_{0..}.json, lists of
         records (index, image as base64, question, multi-choice options, answer, category, l2-category)
  tsv/   one VLMEvalKit TSV (index, image, question, multi-choice options, A-E, answer, category,
         l2-category)

and the same at --baseline-rows (the baseline, measured in the same run). For each set and layout it
runs `evalkit run mme-realworld --data DIR --model vllm/sim-model --base-url URL --limit 50
--no-progress --no-plots --cache-dir C --out O` as a child process against a simulated server started in this
process (SimThread, no answer key), each run with a fresh run directory and response cache (so each
asks again):

  unindexed  EVALKIT_DATA_INDEX=0 and an empty cache folder: a first run as evalkit made it before the
             saved index (the file read forward, then read again to hash it)
  first      an empty cache folder: the file read forward once, hashed as it is read, and indexed
  second     the same again: the cache folder's file-hash memo, lint result and data index stay
  shard      (the full set) `--shard 1/10` with no --limit: every item of the shard, on the index

Printed per run: peak RSS of the evalkit process (os.wait4), seconds from starting it to the first
request the simulator received, wall time, and the bytes it read (`rchar` of /proc/<pid>/io, read
when it has exited and before it is reaped: every read() of the process, its imports included); then
ratios against the same run on the baseline set.

    .venv/bin/python bench/data_scale.py [--rows 30000] [--image-kb 100] [--baseline-rows 300]
        [--layouts json,tsv] [--workdir DIR] [--keep] [--rss-limit-mb 1024] [--second-start-limit-s 10]
        [--first-slack 1.15] [--no-shard]

Targets: peak RSS <= --rss-limit-mb in every run; the second run's time to first request <=
--second-start-limit-s; the full set's first run's <= --first-slack x its unindexed run's; the shard run's bytes
read <= 1.1 x (the bytes of its items' rows + the index). Exit 0 when all are met.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, env_without_keys
from PIL import Image, ImageDraw, ImageFilter

from evalkit.core.shard import shard_index
from evalkit.sim.server import SimConfig, SimThread

CELLS = [  # (Task/Subtask as VLMEvalKit's category, l2-category)
    ("Perception/OCR with Complex Context", "license"),
    ("Perception/Remote Sensing", "count"),
    ("Perception/Diagram and Table", "diagram"),
    ("Perception/Monitoring", "Vehicle/counting"),
    ("Perception/Autonomous_Driving", "Objects_Identify"),
    ("Reasoning/OCR with Complex Context", "scene_understanding"),
    ("Reasoning/Diagram and Table", "diagram"),
    ("Reasoning/Monitoring", "Vehicle/attribute/intention"),
    ("Reasoning/Autonomous_Driving", "Intention"),
]
ROWS_PER_PART = 3500  # the real parts hold about 3,300 questions each
ROW_BYTES = "row-bytes.json"  # beside a set: each row's bytes per layout
BASE_PICTURES = 256


# ------------------------------------------------------------------ the data set


def base_jpegs(n: int, seed: int = 7) -> list[bytes]:
    """n small photo-like JPEGs (blurred noise, shapes), 3-15 KB each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w, h = rng.choice([(160, 120), (192, 144), (224, 168), (256, 192)])
        small = Image.frombytes("RGB", (w // 8, h // 8), rng.randbytes((w // 8) * (h // 8) * 3))
        img = small.filter(ImageFilter.GaussianBlur(1)).resize((w, h), Image.Resampling.BILINEAR)
        d = ImageDraw.Draw(img)
        for _ in range(rng.randrange(3, 9)):
            x, y, r = rng.randrange(w), rng.randrange(h), rng.randrange(6, 40)
            fill = tuple(rng.randrange(256) for _ in range(3))
            (d.ellipse if rng.random() < 0.5 else d.rectangle)((x - r, y - r, x + r, y + r), fill=fill)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=rng.randrange(60, 95))
        out.append(buf.getvalue())
    return out


def padded(jpeg: bytes, size: int, filler: bytes, row: int) -> bytes:
    """The JPEG with comment (COM) segments after its start marker, to about `size` bytes: still a
    valid JPEG of the same picture; the row number and a slice of `filler` make every row's bytes distinct."""
    need = max(0, size - len(jpeg))
    segments = []
    start = (row * 7919) % (len(filler) // 2)
    head = f"row {row} ".encode()
    while need > 4:
        n = min(65533, need - 4)
        body = (head + filler[start:start + n])[:n]
        segments.append(b"\xff\xfe" + (n + 2).to_bytes(2, "big") + body)
        need -= n + 4
        start = (start + n) % (len(filler) // 2)
    return jpeg[:2] + b"".join(segments) + jpeg[2:]


def record_text(i: int, rng: random.Random) -> dict[str, Any]:
    category, l2 = CELLS[i % len(CELLS)]
    base = rng.randrange(1, 40)
    options = [f"({x}) {base + 3 * k}" for k, x in enumerate("ABCD")] + ["(E) The image does not feature the discs"]
    return {"index": i, "question": f"Question {i}: how many discs can be seen in the picture?",
            "multi-choice options": options, "answer": "ABCDE"[rng.randrange(5)], "category": category,
            "l2-category": l2}


def write_sets(folder: Path, rows: int, image_kb: int, layouts: list[str], seed: int = 1) -> dict[str, Path]:
    """Both layouts of one `rows`-question set in one pass (each image encoded once); returns layout -> --data."""
    rng = random.Random(seed)
    pictures = base_jpegs(BASE_PICTURES)
    filler = rng.randbytes(4 << 20)
    json_dir, tsv_dir = folder / "json", folder / "tsv"
    parts_dir = json_dir / "MME-RealWorld"
    parts_dir.mkdir(parents=True, exist_ok=True)
    tsv_dir.mkdir(parents=True, exist_ok=True)
    tsv = (tsv_dir / "MME_RealWorld.tsv").open("w", encoding="utf-8", newline="") if "tsv" in layouts else None
    if tsv:
        tsv.write("\t".join(["index", "image", "question", "multi-choice options", *"ABCDE", "answer", "category",
                             "l2-category"]) + "\n")
    part = None
    row_bytes: dict[str, list[int]] = {"json": [], "tsv": []}  # each row's bytes in each layout (a shard's items)
    try:
        for i in range(rows):
            rec = record_text(i, rng)
            size = max(20_000, int(rng.gauss(image_kb * 1000, image_kb * 200)))
            b64 = base64.b64encode(padded(pictures[i % len(pictures)], size, filler, i)).decode("ascii")
            if "json" in layouts:
                if i % ROWS_PER_PART == 0:
                    if part:
                        part.write("\n]\n")
                        part.close()
                    part = (parts_dir / f"MME_RealWorld_base64_{i // ROWS_PER_PART}.json").open("w", encoding="utf-8")
                    part.write("[\n")
                else:
                    part.write(",\n")  # type: ignore[union-attr]
                text = json.dumps(rec, ensure_ascii=False)
                text = text[:1] + f'"image": "{b64}", ' + text[1:]
                part.write(text)  # type: ignore[union-attr]
                row_bytes["json"].append(len(text.encode()))
            if tsv:
                texts = [o.split(") ", 1)[1] for o in rec["multi-choice options"]]
                line = "\t".join([str(i), b64, rec["question"], repr(rec["multi-choice options"]), *texts,
                                  rec["answer"], rec["category"], rec["l2-category"]]) + "\n"
                tsv.write(line)
                row_bytes["tsv"].append(len(line.encode()))
    finally:
        if part:
            part.write("\n]\n")
            part.close()
        if tsv:
            tsv.close()
    (folder / ROW_BYTES).write_text(json.dumps(row_bytes))
    return {"json": json_dir, "tsv": tsv_dir}


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ------------------------------------------------------------------ the runs


def one_run(data: Path, sim: SimThread, work: Path, args: list[str], env: dict[str, str] | None = None
            ) -> dict[str, float]:
    """One `evalkit run` child: peak RSS (MB), seconds to the simulator's first request, wall seconds,
    bytes it read (`rchar` of /proc/<pid>/io: every read, its imports included)."""
    cache, out = work / "cache", work / "run"
    shutil.rmtree(out, ignore_errors=True)
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):  # answers go; file hashes, lint and index stay
        (cache / name).unlink(missing_ok=True)
    sim.counters.reset()
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "mme-realworld", "--data", str(data), "--model",
           "vllm/sim-model", "--base-url", sim.url, *args, "--no-progress", "--no-plots",
           "--cache-dir", str(cache), "--out", str(out)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(work), env={**env_without_keys(), **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()  # the child's stderr, drained as it runs (a full pipe would stall it)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: its /proc/<pid>/io stays
    with open(f"/proc/{proc.pid}/io", encoding="ascii") as fh:
        rchar = int(dict(line.split(": ") for line in fh.read().splitlines())["rchar"])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    first = sim.counters.first_request_at
    if proc.returncode != 0 or first is None:
        raise RuntimeError(f"evalkit run exited {proc.returncode} after {wall:.1f}s, {sim.counters['requests']} "
                           f"requests: {err.decode(errors='replace')[-2000:]}")
    return {"rss_mb": usage.ru_maxrss / 1024, "first_s": first - t0, "wall_s": wall,
            "requests": float(sim.counters["requests"]), "read_mb": rchar / 1e6}


NO_INDEX = {"EVALKIT_DATA_INDEX": "0"}


def measure(data: Path, sim: SimThread, work: Path, limit: int, label: str, shard_rows: list[int] | None
            ) -> dict[str, dict[str, float]]:
    """The runs of one set and layout, each a fresh run directory and answer cache:
    `unindexed` (EVALKIT_DATA_INDEX=0, no file-hash memo: a first run as evalkit read before the index),
    `first` (no memo, no index: builds it), `second` (the same data again), and with `shard_rows`
    (each row's bytes) `shard` (--shard 1/10, every item of it, on the index)."""
    runs = [("unindexed", ["--limit", str(limit)], NO_INDEX), ("first", ["--limit", str(limit)], None),
            ("second", ["--limit", str(limit)], None)]
    if shard_rows is not None:
        runs.append(("shard", ["--shard", "1/10"], None))
    out = {}
    for name, args, env in runs:
        if name in ("unindexed", "first"):
            shutil.rmtree(work / "cache", ignore_errors=True)  # no file-hash memo, lint or index yet
            work.mkdir(parents=True, exist_ok=True)
        r = one_run(data, sim, work, args, env)
        if name == "shard" and shard_rows is not None:
            r["items_mb"] = sum(b for i, b in enumerate(shard_rows) if shard_index(str(i), 10) == 0) / 1e6
            r["index_mb"] = sum(p.stat().st_size for p in (work / "cache" / "data-index").glob("*.idx")) / 1e6
        print(f"  {label:<16} {name:<9}: peak RSS {r['rss_mb']:7.1f} MB   first request after {r['first_s']:6.2f} s"
              f"   wall {r['wall_s']:6.2f} s   requests {int(r['requests'])}   read {r['read_mb']:9.1f} MB", flush=True)
        out[name] = r
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--baseline-rows", type=int, default=300)
    ap.add_argument("--image-kb", type=int, default=100)
    ap.add_argument("--layouts", default="json,tsv")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the generated sets (with --workdir: reused when present)")
    ap.add_argument("--rss-limit-mb", type=float, default=1024)
    ap.add_argument("--second-start-limit-s", type=float, default=10.0)
    ap.add_argument("--first-slack", type=float, default=1.15,
                    help="the first (indexing) run may take at most this times the unindexed run's start")
    ap.add_argument("--no-shard", action="store_true", help="leave out the --shard 1/10 run of the full set")
    args = ap.parse_args()
    layouts = [x for x in args.layouts.split(",") if x]
    own = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="evalkit-data-scale-")) if own else args.workdir
    work.mkdir(parents=True, exist_ok=True)
    print(f"# workdir {work}", flush=True)
    results: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    try:
        sets = {}
        for name, rows in (("baseline", args.baseline_rows), ("full", args.rows)):
            folder = work / f"{name}-{rows}-{args.image_kb}kb"
            done = folder / ".complete"
            t0 = time.monotonic()
            if not done.exists() or not (folder / ROW_BYTES).exists():
                shutil.rmtree(folder, ignore_errors=True)
                write_sets(folder, rows, args.image_kb, layouts)
                done.write_text("ok")
                how = f"written in {time.monotonic() - t0:.1f} s"
            else:
                how = "reused"
            sets[name] = {"json": folder / "json", "tsv": folder / "tsv", "folder": folder}
            sizes = ", ".join(f"{x} {folder_bytes(sets[name][x]) / 1e9:.2f} GB" for x in layouts)
            print(f"# {name}: {rows} questions, {sizes} ({how})", flush=True)
        with SimThread(SimConfig()) as sim:
            for layout in layouts:
                for name in ("baseline", "full"):
                    rows = json.loads((sets[name]["folder"] / ROW_BYTES).read_text())[layout] \
                        if name == "full" and not args.no_shard else None
                    results[(layout, name)] = measure(sets[name][layout], sim, work / "runs" / f"{layout}-{name}",
                                                      args.limit, f"{layout} {name}", rows)
    finally:
        if own and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return report(results, args)


def report(results: dict[tuple[str, str], dict[str, dict[str, float]]], args: argparse.Namespace) -> int:
    """The table, each run against the same run of the baseline set, and the targets."""
    ok = True
    print(f"\n{'layout':<6} {'set':<9} {'run':<9} {'RSS MB':>8} {'x base':>7} {'first s':>8} {'x base':>7} "
          f"{'read MB':>9}  targets")
    for (layout, name), runs in results.items():
        base = results[(layout, "baseline")]
        for run, r in runs.items():
            b = base.get(run, base["first"])
            checks = []
            if r["rss_mb"] > args.rss_limit_mb:
                checks.append(f"RSS > {args.rss_limit_mb:g} MB")
            if run == "second" and r["first_s"] > args.second_start_limit_s:
                checks.append(f"first request > {args.second_start_limit_s:g} s")
            if run == "first" and name == "full" and r["first_s"] > runs["unindexed"]["first_s"] * args.first_slack:
                checks.append(f"first run > {args.first_slack:g} x the unindexed one")
            if run == "shard":
                bound = 1.1 * (r["items_mb"] + r["index_mb"])
                checks.append(f"read {r['read_mb']:.1f} MB {'<=' if r['read_mb'] <= bound else '>'} 1.1 x "
                              f"({r['items_mb']:.1f} MB of items + {r['index_mb']:.1f} MB of index)")
                ok &= r["read_mb"] <= bound
            ok &= not [c for c in checks if not c.startswith("read ")]
            print(f"{layout:<6} {name:<9} {run:<9} {r['rss_mb']:8.1f} {r['rss_mb'] / b['rss_mb']:7.2f} "
                  f"{r['first_s']:8.2f} {r['first_s'] / b['first_s']:7.2f} {r['read_mb']:9.1f}  "
                  f"{'; '.join(checks) or 'ok'}")
    print("all targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
