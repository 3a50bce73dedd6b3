"""Client-side rate limiting against a server that refuses what exceeds its rate.

The simulated server (its own process) allows --server-rps requests/second (burst rps/10) and
answers 429 + Retry-After beyond that. evalkit runs --queries queries of an `mcq` JSONL dataset
end to end (evalkit.run_async, cache off) with --rpm = 60 * server rps, and we report:

  rate     completed queries / elapsed, as % of the server's rate   (target 90-100 %)
  lost     queries without a non-error record                      (target 0)
  429s     server's rate_limited / requests, from /sim/counters     (target < 1 %)

Baseline, in the same run: the same number of requests from a bare aiohttp loop with no limiter
(--concurrency in flight, no retries); most of them are expected to be refused.

    .venv/bin/python bench/ratelimit.py [--queries 1000] [--server-rps 100] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from _common import QUESTION, SimProcess, bare_loop, chat_body, env_without_keys, make_jpeg, write_dataset

from evalkit.engine.evaluate import run_async


async def evalkit_run(url: str, data: Path, out: Path, concurrency: int, rpm: float, timeout_s: float):
    return await asyncio.wait_for(
        run_async("mcq", "vllm/sim-model", data=str(data), no_cache=True, progress=False, concurrency=concurrency,
                  rpm=rpm, base_url=url, out=str(out), env=env_without_keys()),
        timeout_s)


def share(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--server-rps", type=float, default=100.0)
    p.add_argument("--rpm", type=float, default=None, help="evalkit's --rpm (default 60 x server rps)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--latency-ms", type=float, default=0.0, help="server latency")
    p.add_argument("--timeout", type=float, default=120.0, help="give up on the evalkit run after this many s")
    args = p.parse_args(argv)
    rpm = args.rpm or 60.0 * args.server_rps
    n = args.queries

    with tempfile.TemporaryDirectory(prefix="evalkit-bench-rl-") as tmp:
        work = Path(tmp)
        image = work / "image.jpg"
        make_jpeg(image)
        data = work / "items.jsonl"
        write_dataset(data, image, n)
        body = chat_body(image.read_bytes(), QUESTION)
        with SimProcess("--rps", f"{args.server_rps:g}", "--latency-ms", f"{args.latency_ms:g}") as sim:
            print(f"server: {args.server_rps:g} req/s (burst {max(1.0, args.server_rps / 10):g}), "
                  f"latency {args.latency_ms:g} ms; {n} queries, {args.concurrency} in flight\n", flush=True)

            # baseline first: then the server's bucket has refilled long before evalkit starts
            sim.reset()
            t0 = time.perf_counter()
            statuses = asyncio.run(bare_loop(sim.url, [body] * n, args.concurrency))
            bare_s = time.perf_counter() - t0
            bare = sim.counters()
            time.sleep(1.0)  # let the server's bucket refill

            sim.reset()
            t0 = time.perf_counter()
            result = asyncio.run(evalkit_run(sim.url, data, work / "run", args.concurrency, rpm, args.timeout))
            elapsed = time.perf_counter() - t0
            ours = sim.counters()

        good = sum(1 for r in result.records if r.error is None)
        lost = n - good
        rate = good / elapsed
        rate_pct = 100.0 * rate / args.server_rps
        pct_429 = share(ours["rate_limited"], ours["requests"])
        bare_429 = share(bare["rate_limited"], bare["requests"])
        checks = {
            "rate": 90.0 <= rate_pct <= 100.0 + 1e-9,
            "lost": lost == 0,
            "429": pct_429 < 1.0,
        }

        def mark(name: str) -> str:
            return "ok" if checks[name] else "MISS"

        print(f"{'':<26} {'evalkit --rpm ' + format(rpm, 'g'):>22} {'bare, no limiter':>18}  target")
        print(f"{'elapsed s':<26} {elapsed:>22.2f} {bare_s:>18.2f}")
        print(f"{'completed':<26} {good:>22} {statuses.get('200', 0):>18}")
        print(f"{'achieved req/s':<26} {rate:>22.1f} {statuses.get('200', 0) / bare_s:>18.1f}")
        print(f"{'rate % of server':<26} {rate_pct:>21.1f}% {'':>18}  90-100% {mark('rate')}")
        print(f"{'queries lost':<26} {lost:>22} {n - statuses.get('200', 0):>18}  0 {mark('lost')}")
        print(f"{'server requests':<26} {ours['requests']:>22} {bare['requests']:>18}")
        print(f"{'answered 429':<26} {ours['rate_limited']:>22} {bare['rate_limited']:>18}")
        print(f"{'429 share':<26} {pct_429:>21.2f}% {bare_429:>17.1f}%  < 1% {mark('429')}")
        if lost:
            kinds: dict[str, int] = {}
            for r in result.records:
                if r.error is not None:
                    kinds[r.error] = kinds.get(r.error, 0) + 1
            print(f"errors left in records: {kinds}; records present: {len(result.records)} of {n}")
        return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
