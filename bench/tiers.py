"""The same items at the standard tier, at flex and through the batch API (issue 45, item 1): what each
costs (paid, and at list price) and how long it takes, side by side, as ratios to the standard run
measured in the same invocation (machines here are noisy).

Each delivery gets a fresh simulated server (its own process: `evalkit sim --bench mcq --data D
--latency-ms L --flex-latency-ms F`, so each run sees the same prompt-cache hits) and `evalkit run mcq
--model openai/gpt-4o` in a child process with a fresh cache: no flag, `--service-tier flex`, `--batch`.
Costs are read from each run's summary.json (`usage.cost_usd`: paid; `usage.list_cost_usd`: at list
price); the flex answers are priced at the tier their replies say served them. The simulator's batches
end at once (a real batch takes up to 24 h): the batch wall time is a floor, not a forecast.

    .venv/bin/python bench/tiers.py [--queries 400] [--images 40] [--latency-ms 50] [--flex-latency-ms 200]

Exit 0 when flex and batch each cost half the standard run (paid and list, within 1e-9) and every run
completed; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SimProcess
from load import draw_images, write_questions

MODES = {"standard": [], "flex": ["--service-tier", "flex"], "batch": ["--batch"]}


def run_once(mode: str, data: Path, work: Path, args: argparse.Namespace) -> dict[str, float]:
    """One delivery against its own fresh server: wall seconds, requests, costs."""
    sim_args = ["--bench", "mcq", "--data", str(data), "--theta", "1", "--r", "1",
                "--latency-ms", str(args.latency_ms), "--flex-latency-ms", str(args.flex_latency_ms)]
    with SimProcess(*sim_args, startup_s=60.0) as sim:
        out = work / f"run-{mode}"
        cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "openai/gpt-4o", "--data", str(data),
               "--base-url", sim.url + "/v1", "--out", str(out), "--cache-dir", str(work / f"cache-{mode}"),
               "--no-progress", "--no-plots", "--concurrency", str(args.concurrency), *MODES[mode]]
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=str(work), env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        counters = sim.counters()
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-2000:])
    usage = json.loads((out / "summary.json").read_text())["usage"]
    return {"wall": wall, "exit": done.returncode, "requests": counters["requests"],
            "batch_lines": counters["batch"]["lines"], "paid": usage.get("cost_usd") or 0.0,
            "list": usage.get("list_cost_usd") or 0.0}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=50.0, help="the server's latency for every request")
    ap.add_argument("--flex-latency-ms", type=float, default=200.0, help="added to each flex request")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        draw_images(work / "images", args.images)
        data = work / "data.jsonl"
        write_questions(data, args.queries, args.images)
        print(f"{args.queries} queries over {args.images} images, openai/gpt-4o, concurrency {args.concurrency}; "
              f"server latency {args.latency_ms:g} ms, flex +{args.flex_latency_ms:g} ms")
        rows = {mode: run_once(mode, data, work, args) for mode in MODES}
    base = rows["standard"]
    print(f"{'delivery':<9} {'wall s':>7} {'x std':>6} {'paid USD':>10} {'x std':>6} {'list USD':>10} {'x std':>6} "
          f"{'requests':>8} {'lines':>6} {'exit':>4}")
    ok = True
    for mode, r in rows.items():
        paid_x, list_x = r["paid"] / base["paid"], r["list"] / base["list"]
        print(f"{mode:<9} {r['wall']:>7.2f} {r['wall'] / base['wall']:>6.2f} {r['paid']:>10.6f} {paid_x:>6.3f} "
              f"{r['list']:>10.6f} {list_x:>6.3f} {r['requests']:>8} {r['batch_lines']:>6} {r['exit']:>4}")
        want = 1.0 if mode == "standard" else 0.5
        ok &= r["exit"] == 0 and abs(paid_x - want) < 1e-9 and abs(list_x - want) < 1e-9
    print("targets (flex and batch at half the standard cost, every run complete):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
