"""Adaptive limits: how close a default run gets to a hidden rate limit, and how much it is refused.

Each scenario starts the simulated server in its own process with a hidden limit and 50 ms latency,
then runs `mcq` end to end (evalkit.run_async, cache off, default concurrency 32, no --rpm/--tpm)
twice: with adaptive limits (the default) and with --no-adaptive (0.1.0's behaviour, the baseline
measured in the same invocation). Reported per run:

  rate       answered queries / elapsed, as % of the hidden limit
  refused    the server's 429s / its requests

Scenarios (targets from the issue: with headers >= 85 % of the limit and < 5 % refused; without
headers, by AIMD, >= 75 % and < 10 %):

  headers-40     40 req/s, OpenAI x-ratelimit-* headers
  headers-200    200 req/s, OpenAI headers
  anthropic-40   40 req/s, anthropic-ratelimit-* headers
  tpm            a tokens-per-minute limit worth about 40 req/s, OpenAI headers
  aimd-40        40 req/s, no headers at all (not even Retry-After): AIMD
  aimd-200       200 req/s, no headers

    .venv/bin/python bench/adaptive.py [--seconds 30] [--scenarios headers-40,aimd-40]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from _common import SimProcess, env_without_keys, make_jpeg, write_dataset

from evalkit.engine.evaluate import run_async

SCENARIOS = {  # name: (server flags, limit in requests/s, has headers)
    "headers-40": (("--rps", "40", "--rate-headers", "openai"), 40.0, True),
    "headers-200": (("--rps", "200", "--rate-headers", "openai"), 200.0, True),
    "anthropic-40": (("--rps", "40", "--rate-headers", "anthropic"), 40.0, True),
    "tpm": ((), 40.0, True),  # flags filled in once the tokens per request are known
    "aimd-40": (("--rps", "40", "--rate-headers", "none"), 40.0, False),
    "aimd-200": (("--rps", "200", "--rate-headers", "none"), 200.0, False),
}


async def one_run(url: str, data: Path, out: Path, adaptive: bool, timeout_s: float):
    return await asyncio.wait_for(
        run_async("mcq", "vllm/sim-model", data=str(data), no_cache=True, progress=False, base_url=url,
                  out=str(out), env=env_without_keys(), adaptive=adaptive, max_attempts=50),
        timeout_s)


def measure(flags: tuple[str, ...], data: Path, out: Path, n: int, limit: float, adaptive: bool) -> dict:
    with SimProcess("--latency-ms", "50", *flags) as sim:
        t0 = time.perf_counter()
        result = asyncio.run(one_run(sim.url, data, out, adaptive, timeout_s=20 * n / limit + 60))
        elapsed = time.perf_counter() - t0
        c = sim.counters()
    good = sum(1 for r in result.records if r.error is None)
    return {"rate": 100.0 * good / elapsed / limit, "refused": 100.0 * c["rate_limited"] / max(1, c["requests"]),
            "requests": c["requests"], "lost": n - good, "elapsed": elapsed}


def tokens_per_request(data: Path, work: Path) -> float:
    """What one request costs a token limit in the end: its prompt and output tokens (the server
    holds max_tokens while it answers and gives back what the reply did not use)."""
    with SimProcess("--latency-ms", "0") as sim:
        result = asyncio.run(one_run(sim.url, data, work / "probe", True, 60))
    used = [sum(r.usage.get(k, 0) for k in ("input_tokens", "output_tokens")) for r in result.records]
    return sum(used) / max(1, len(used))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0, help="queries = seconds x limit (default 30)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = p.parse_args(argv)
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    failed = False
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-adaptive-") as tmp:
        work = Path(tmp)
        image = work / "image.jpg"
        make_jpeg(image)
        print(f"{'scenario':<14} {'run':<12} {'rate % limit':>12} {'refused %':>10} {'requests':>9} "
              f"{'lost':>5} {'wall s':>7}  target")
        for name in names:
            flags, limit, headers = SCENARIOS[name]
            n = int(args.seconds * limit)
            data = work / f"{name}.jsonl"
            write_dataset(data, image, n)
            if name == "tpm":
                per = tokens_per_request(data, work)
                flags = ("--tpm", f"{per * limit * 60:.0f}", "--rate-headers", "openai")
            results = {}
            for label, adaptive in (("adaptive", True), ("no-adaptive", False)):
                results[label] = r = measure(flags, data, work / f"{name}-{label}", n, limit, adaptive)
                target = ""
                if adaptive:
                    want_rate, want_refused = (85.0, 5.0) if headers else (75.0, 10.0)
                    ok = r["rate"] >= want_rate and r["refused"] < want_refused and r["lost"] == 0
                    failed |= not ok
                    target = f">= {want_rate:g} %, < {want_refused:g} %: {'ok' if ok else 'MISS'}"
                print(f"{name:<14} {label:<12} {r['rate']:>12.1f} {r['refused']:>10.1f} {r['requests']:>9} "
                      f"{r['lost']:>5} {r['elapsed']:>7.1f}  {target}", flush=True)
            a, b = results["adaptive"], results["no-adaptive"]
            print(f"{'':<14} {'ratio':<12} {a['rate'] / max(b['rate'], 1e-9):>12.2f} "
                  f"{a['refused'] / max(b['refused'], 1e-9):>10.2f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
