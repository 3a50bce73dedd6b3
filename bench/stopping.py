"""What `--until-ci W` saves on a 23.6k-item benchmark at 60 % accuracy, as `evalkit plan` quotes it.

For W = 1, 2, 3 points: the fixed-n figure (Wald with the finite-population correction), the median
items at which `--until-ci W` stopped over 500 seeded simulated runs of the rule itself (the stratified
confidence sequence with bets tuned to W, first look at 50 items, a look after every item), and the
requests and dollars of each against the whole set (the baseline: ratio 1.00), priced by the dry run
of the same data (a synthetic mcq set of that size; the price table's openai/gpt-4o, standard tier).
Nothing is sent: a plan is offline.

    .venv/bin/python bench/stopping.py [--items 23600] [--accuracy 0.6] [--runs 500] [--categories 1]

Exits 0 when, for every W, fixed n <= the sequential median < the whole set, and each plan (the dry run of
the whole set and the simulation) took under 60 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from evalkit.multi.plan import PlanAsk, plan


def synthetic_set(folder: Path, n: int, categories: int) -> Path:
    """n four-option questions on a few small images, in `categories` categories of (nearly) equal size."""
    (folder / "images").mkdir(parents=True)
    for k in range(8):
        Image.new("RGB", (512 + 64 * k, 384), (30 * k, 90, 200)).save(folder / "images" / f"{k}.png")
    path = folder / "data.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i:06d}", "image": f"images/{i % 8}.png", "question": f"Question {i}?",
                                "options": {"A": "one", "B": "two", "C": "three", "D": "four"},
                                "answer": "ABCD"[i % 4], "category": f"c{i % categories}"}) + "\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=23_600)
    ap.add_argument("--accuracy", type=float, default=0.6)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--categories", type=int, default=1)
    ap.add_argument("--widths", default="1,2,3")
    ap.add_argument("--model", default="openai/gpt-4o")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-stopping-") as tmp:
        data = synthetic_set(Path(tmp) / "ds", args.items, args.categories)
        print(f"{args.items:,} items, {args.categories} categor{'y' if args.categories == 1 else 'ies'}, accuracy "
              f"{args.accuracy}, {args.runs} seeded runs per width, {args.model} (standard tier), priced by the "
              f"dry run")
        print(f"{'±W':>3}  {'fixed n':>7}  {'until-ci median':>15}  {'requests':>8}  {'vs whole':>8}  "
              f"{'list cost (high)':>16}  {'vs whole':>8}  {'fixed vs whole':>14}  {'plan s':>6}")
        whole_line = None
        for w in (float(x) for x in args.widths.split(",")):
            t0 = time.perf_counter()
            p = plan(PlanAsk("mcq", (args.model,), width=w, accuracy=args.accuracy, sim_runs=args.runs,
                             options={"data": str(data), "cache_dir": str(Path(tmp) / "cache")}), env={})
            took = time.perf_counter() - t0
            rows = p["models"][0]["plans"]
            fixed, seq, whole = rows["fixed"], rows["sequential"], rows["whole"]
            req_ratio = seq["requests"] / whole["requests"]
            cost_ratio = seq["list_high_usd"] / whole["list_high_usd"]
            print(f"{w:>3g}  {fixed['items']:>7,}  {seq['items']:>15,}  {seq['requests']:>8,}  {req_ratio:>8.2f}  "
                  f"{'$' + format(seq['list_high_usd'], ',.2f'):>16}  {cost_ratio:>8.2f}  "
                  f"{fixed['requests'] / whole['requests']:>14.2f}  {took:>6.1f}")
            whole_line = (f"whole set: {whole['items']:,} items, {whole['requests']:,} requests, "
                          f"${whole['list_low_usd']:,.2f} – ${whole['list_high_usd']:,.2f} at list price (ratio 1.00)")
            ok &= fixed["items"] <= seq["items"] < whole["items"] and took < 60
        print(whole_line)
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
