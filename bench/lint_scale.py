"""Many questions on one picture: does `evalkit lint`, and a run's start, grow linearly with the items?

Writes (into a temporary folder) an `mcq` JSONL set of --small and of --large questions that all show
the same one PNG, then measures for each size:

  lint   seconds of `evalkit.lint.engine.lint_data` (the full `evalkit lint mcq --data FILE --no-cache`:
         load, every check, the image decoded once) in a child process, imports not counted
  start  seconds from starting `evalkit run mcq --model vllm/sim-model --base-url URL --no-cache` as a
         child process to the first request the simulated server (SimThread, in this process) receives;
         the child is stopped there, so nothing is asked beyond it

and prints the ratio large/small. Linear work gives about large/small (10 for 100k vs 10k); work
quadratic in the items sharing one image gives its square (100). Target: ratio <= 2 x large/small.

    .venv/bin/python bench/lint_scale.py [--small 10000] [--large 100000] [--parts lint,start] [--checkout DIR]

--checkout DIR measures the evalkit in DIR instead (a `git worktree add DIR COMMIT` of an older commit):
the children run with PYTHONPATH=DIR, the simulator is this checkout's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import env_without_keys
from PIL import Image

from evalkit.sim.server import SimConfig, SimThread

START_DEADLINE_S = 900.0  # a run start slower than this is reported as a failure, not waited for


def write_set(folder: Path, n: int) -> Path:
    """n four-option questions, every one on the same image file."""
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 64), (180, 40, 40)).save(folder / "one.png")
    path = folder / "data.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "image": "one.png", "question": f"Question {i}: which colour?",
                                 "options": {"A": "red", "B": "blue", "C": "green", "D": "grey"},
                                 "answer": "ABCD"[i % 4]}) + "\n")
    return path


LINT = ("import sys, time; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
        "from evalkit.lint.engine import lint_data; lint_data('mcq', sys.argv[1], None, cache_dir=None); "
        "t0 = time.perf_counter(); lint_data('mcq', sys.argv[2], None, cache_dir=None); "
        "print(time.perf_counter() - t0)")


def child_env(checkout: str | None) -> dict[str, str]:
    env = {**env_without_keys(), "VLLM_API_KEY": "bench"}
    if checkout:
        env["PYTHONPATH"] = checkout
    return env


def time_lint(data: Path, warm: Path, checkout: str | None) -> float:
    """Seconds of lint_data on `data` in a child process, after a lint of `warm` (imports are not timed)."""
    proc = subprocess.run([sys.executable, "-c", LINT, str(warm), str(data)], env=child_env(checkout),
                          capture_output=True, text=True, timeout=START_DEADLINE_S)
    if proc.returncode != 0:
        raise RuntimeError(f"lint exited {proc.returncode}: {proc.stderr[-1500:]}")
    return float(proc.stdout.split()[-1])


def time_start(data: Path, sim: SimThread, work: Path, checkout: str | None) -> float:
    """Seconds from spawning the run to the simulator's first request; the child is then stopped."""
    sim.counters.reset()
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--data", str(data), "--model", "vllm/sim-model",
           "--base-url", sim.url, "--no-cache", "--no-progress", "--out", str(work / f"run-{data.parent.name}")]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(work), env=child_env(checkout), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        while sim.counters.first_request_at is None:
            if proc.poll() is not None:
                raise RuntimeError(f"evalkit run exited {proc.returncode} before its first request")
            if time.monotonic() - t0 > START_DEADLINE_S:
                raise RuntimeError(f"no request after {START_DEADLINE_S:g} s")
            time.sleep(0.02)
        return sim.counters.first_request_at - t0
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--large", type=int, default=100_000)
    ap.add_argument("--parts", default="lint,start")
    ap.add_argument("--checkout", default=None, help="measure the evalkit of this folder (e.g. a git worktree of an "
                                                     "older commit) instead of this one's")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    expected = args.large / args.small
    ok = True
    with tempfile.TemporaryDirectory(prefix="lint-scale-") as tmp, SimThread(SimConfig()) as sim:
        work = Path(tmp)
        sets = {n: write_set(work / f"n{n}", n) for n in (args.small, args.large)}
        warm = write_set(work / "warm", 10)
        for part in parts:
            times = {}
            for n, data in sets.items():
                times[n] = (time_lint(data, warm, args.checkout) if part == "lint"
                            else time_start(data, sim, work, args.checkout))
                print(f"{part:<6} {n:>8,} items on one image: {times[n]:7.2f} s", flush=True)
            ratio = times[args.large] / times[args.small]
            good = ratio <= 2 * expected
            ok &= good
            print(f"{part:<6} ratio {args.large:,}/{args.small:,}: {ratio:6.1f}  (linear ~{expected:.0f}, "
                  f"quadratic ~{expected ** 2:.0f}) {'ok' if good else 'NOT LINEAR'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
