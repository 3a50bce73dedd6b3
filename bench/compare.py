"""How long `evalkit compare` takes at MME-RealWorld scale, against the obvious way to bootstrap.

Eight synthetic runs of 29,000 questions each (the bundled MME-RealWorld sample's questions,
repeated under new ids, graded right with a per-model probability). The baseline, measured in
the same run, is a bootstrap that re-runs the benchmark's own `aggregate` on every resample:
its per-resample time is measured on a few resamples and extrapolated to 2,000. evalkit's
ScoreTable bootstrap does the same 2,000 resamples as matrix products.

    .venv/bin/python bench/compare.py [--items 29000] [--models 8]

Exits 0 when the whole comparison (8 models, 2,000 resamples each and for each of the 28
pairs, report and plots) is at least 20x faster than the baseline's intervals alone would be.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from run_factory import make_run  # noqa: E402

from evalkit.benchmarks.prepare import prepare  # noqa: E402
from evalkit.core.record import Record  # noqa: E402
from evalkit.multi.compare import compare  # noqa: E402

DATA = ROOT / "datasets" / "mme-realworld" / "MME_RealWorld.json"


def records_for(queries, n_items: int, p_right: float, seed: int) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(n_items):
        q = queries[i % len(queries)]
        ok = rng.random() < p_right
        letters = list(q.options)
        chosen = q.gold if ok else rng.choice([c for c in letters if c != q.gold])
        qid = f"{q.id}#{i}"
        out.append(Record(query_id=qid, item_id=qid, base_id=qid, variant={}, model="m", request_key="",
                          response=chosen, gold=q.gold, parsed=chosen, parse_method="rule", correct=ok,
                          category=q.category))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=29000)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--baseline-resamples", type=int, default=5)
    args = ap.parse_args()
    opts = {"data": str(DATA)}
    bench, _, queries, *_ = prepare("mme-realworld", opts)
    options = opts
    with tempfile.TemporaryDirectory() as tmp:
        dirs, all_records = [], []
        for m in range(args.models):
            recs = records_for(queries, args.items, 0.45 + 0.03 * m, seed=m)
            all_records.append(recs)
            dirs.append(make_run(Path(tmp) / f"run{m}", f"model-{m}", recs, benchmark="mme-realworld",
                                 data=str(DATA)))
        # baseline: aggregate() on resampled records
        rng = np.random.default_rng(0)
        recs = all_records[0]
        t0 = time.perf_counter()
        for _ in range(args.baseline_resamples):
            idx = rng.integers(0, len(recs), len(recs))
            bench.aggregate([recs[i] for i in idx], options)
        per_resample = (time.perf_counter() - t0) / args.baseline_resamples
        baseline = per_resample * 2000 * args.models
        t0 = time.perf_counter()
        c = compare(dirs, out=Path(tmp) / "cmp", n_boot=2000)
        ours = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ratio = baseline / ours
    print(f"{args.models} models x {args.items:,} questions, 2,000 resamples")
    print(f"baseline: aggregate() per resample {per_resample * 1000:.0f} ms -> {baseline:,.0f} s "
          f"for the {args.models} intervals alone (extrapolated)")
    print(f"evalkit compare, everything ({len(c.pairs)} paired tests, report, plots): {ours:.1f} s")
    print(f"speed-up: {ratio:,.0f}x (target >= 20x)   peak RSS {rss:,.0f} MB")
    print("ranking:", ", ".join(c.ranking))
    return 0 if ratio >= 20 else 1


if __name__ == "__main__":
    sys.exit(main())
