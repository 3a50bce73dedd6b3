"""A two-provider matrix in one command against the slower provider alone: the matrix asks both at once,
so its wall time should be close to the slower one's, not the sum of the two.

Two simulated servers in their own processes, one fast (--fast-ms per answer) and one slow (--slow-ms),
the first spoken to as vllm/sim-model, the second as openai/sim-model. Each command below is a whole
`evalkit run` subprocess (start-up, asking, report, and for the matrix its comparison and view site),
with a fresh cache and --out, --no-plots, --concurrency C:

    slow alone     evalkit run mcq --model openai/sim-model
    fast alone     evalkit run mcq --model vllm/sim-model
    matrix         evalkit run mcq --model vllm/sim-model --model openai/sim-model

    .venv/bin/python bench/matrix.py [--items 120] [--fast-ms 20] [--slow-ms 200] [--concurrency 8] [--repeats 2]

Prints each command's best wall time over --repeats rounds (and the asking phase of its slowest run,
summary.json's throughput.ask_s) and matrix / slow alone. Exit 0 when that
ratio is at most 1.3 (the matrix's comparison and site, which a single run does not make, are in it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, SimProcess, env_without_keys, make_jpeg, write_dataset

TARGET = 1.3


def _ask_s(work: Path) -> float:
    """The longest asking phase among the command's runs (summary.json throughput.ask_s)."""
    return max(json.loads(p.read_text())["throughput"]["ask_s"] for p in (work / "out").rglob("summary.json"))


def _run(models: list[str], data: Path, work: Path, env: dict[str, str], concurrency: int) -> float:
    work.mkdir(parents=True)
    argv = [sys.executable, "-m", "evalkit.cli", "run", "mcq", *(a for m in models for a in ("--model", m)),
            "--data", str(data), "--out", str(work / "out"), "--cache-dir", str(work / "cache"), "--no-plots",
            "--no-progress", "--concurrency", str(concurrency)]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(models)} exited with {proc.returncode}: {proc.stderr[-2000:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=120)
    ap.add_argument("--fast-ms", type=float, default=20.0)
    ap.add_argument("--slow-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalkit-matrix-") as tmp:
        root = Path(tmp)
        make_jpeg(root / "img.jpg")
        write_dataset(root / "data.jsonl", root / "img.jpg", args.items)
        with SimProcess("--latency-ms", str(args.fast_ms)) as fast, SimProcess("--latency-ms", str(args.slow_ms)) as slow:
            env = {**env_without_keys(), "VLLM_BASE_URL": fast.url, "OPENAI_BASE_URL": slow.url + "/v1",
                   "OPENAI_API_KEY": "sk-sim"}
            cases = {"slow alone": ["openai/sim-model"], "fast alone": ["vllm/sim-model"],
                     "matrix": ["vllm/sim-model", "openai/sim-model"]}
            best: dict[str, float] = {}
            asking: dict[str, float] = {}
            for r in range(args.repeats):
                order = list(cases) if r % 2 == 0 else list(reversed(cases))
                for name in order:
                    work = root / f"{name.replace(' ', '-')}-{r}"
                    took = _run(cases[name], root / "data.jsonl", work, env, args.concurrency)
                    best[name] = min(best.get(name, took), took)
                    asking[name] = min(asking.get(name, _ask_s(work)), _ask_s(work))
                    print(f"round {r + 1}  {name:<11} {took:6.2f} s (asking {_ask_s(work):.2f} s)", flush=True)
    ratio = best["matrix"] / best["slow alone"]
    print(f"\n{args.items} queries per model, {args.fast_ms:g} ms and {args.slow_ms:g} ms per answer, "
          f"concurrency {args.concurrency}; best of {args.repeats}")
    for name, took in best.items():
        print(f"  {name:<11} {took:6.2f} s   its slowest run's asking phase {asking[name]:.2f} s")
    print(f"  matrix / slow alone = {ratio:.2f} (target <= {TARGET}); matrix / (slow + fast) = "
          f"{best['matrix'] / (best['slow alone'] + best['fast alone']):.2f}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
