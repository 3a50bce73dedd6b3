"""Throughput of evalkit's request path against a bare aiohttp loop, on the simulated server.

The server runs in its own process (`python -m evalkit.cli sim`). For each server latency,
each path sends --requests requests with --concurrency in flight, cache off, one ~30 KB JPEG:

  bare      one aiohttp ClientSession, a semaphore, the same pre-encoded body every time
  vllm      evalkit's Runner + vllm provider + Limiter + NullCache + ImagePipeline over
            distinct Query objects (key, image memo, provider, retries wrapper, limiter)
  run       evalkit.run_async("mcq", "vllm/sim-model", ...) on a JSONL dataset: the whole
            run (load, expand, ask, records.jsonl, parse, summary, report)
  openai    the same Runner with the openai/ provider (the shared aiohttp chat-completions client)
  bedrock   the same Runner with bedrock/ on the Converse API: every request signed with botocore's SigV4
            (fixed fake keys and a session token) over evalkit's aiohttp client; the server does not check
            the signatures (the client's cost is measured, not the simulator's)

bare, vllm, run and bedrock are measured in rotating order over --repeats rounds, after a short warm-up;
the best round of each is reported and divided by the best bare round of the same latency.
openai (information only, ~5x slower) is measured once per latency with --openai-requests.

    .venv/bin/python bench/throughput.py [--requests 3000] [--concurrency 64] [--latencies 0,100]
        [--repeats 2] [--paths bare,vllm,run,openai,bedrock] [--openai-requests 1000]
        [--profile vllm|run ...] [--profile-only]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _common import QUESTION, SimProcess, bare_loop, chat_body, env_without_keys, make_jpeg, write_dataset

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Outcome, RetryPolicy, Runner
from evalkit.ask.store.cache import NullCache
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, Query
from evalkit.engine.evaluate import run_async
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers import create_provider, parse_spec

TARGETS = {0.0: 0.5, 100.0: 0.8}  # vllm path / bare, acceptance
BEDROCK_TARGETS = {100.0: 0.8}  # bedrock path / bare (issue 34): signing must not throttle the runner
ALL_PATHS = ("bare", "vllm", "run", "openai", "bedrock")
BEDROCK_MODEL = "us.amazon.nova-lite-v1:0"
BEDROCK_ENV = {"AWS_ACCESS_KEY_ID": "AKIAEVALKITBENCH0001", "AWS_SECRET_ACCESS_KEY": "bench/secret+key0123456789abcdefABCDEF",
               "AWS_SESSION_TOKEN": "bench-session-token", "AWS_REGION": "us-east-1"}


def make_queries(image: Path, n: int, tag: str) -> list[Query]:
    """n distinct queries (distinct question text, so no key repeats) on the same image file."""
    ref = ImageRef.from_path(str(image))
    params = GenParams(temperature=0.0, max_tokens=1024)
    return [
        Query(id=f"{tag}{i}", item_id=f"{tag}{i}", base_id=f"{tag}{i}", variant={},
              messages=(Message.user(ImagePart(ref), f"[{tag} {i}] {QUESTION}"),), gold="A",
              options={"A": "a cat", "B": "a dog", "C": "a tree", "D": "a car"}, params=params)
        for i in range(n)
    ]


async def runner_path(model: str, url: str, queries: list[Query], concurrency: int) -> int:
    """One evalkit run's ask phase (fresh provider, limiter, cache, pipeline); returns errors."""
    env = {**env_without_keys(), "OPENAI_API_KEY": "sk-sim-bench", **BEDROCK_ENV}
    spec = parse_spec(model, [url if model.startswith("bedrock/") else url + "/v1"], env)
    provider = create_provider(spec, env)
    pipeline = ImagePipeline()
    runner = Runner(provider, limiter=Limiter(concurrency=concurrency), cache=NullCache(), pipeline=pipeline,
                    policy=RetryPolicy())
    errors = 0

    def sink(outcome: Outcome) -> None:
        nonlocal errors
        if not outcome.response.ok:
            errors += 1

    try:
        await runner.run(queries, sink, workers=concurrency)
    finally:
        await provider.close()
        pipeline.close()
    return errors


async def full_run(url: str, data: Path, concurrency: int) -> int:
    """evalkit.run_async end to end in a fresh run directory; returns queries without a good record."""
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-run-") as out:
        result = await run_async("mcq", "vllm/sim-model", data=str(data), no_cache=True, progress=False,
                                 concurrency=concurrency, base_url=url, out=out, env=env_without_keys())
        good = sum(1 for r in result.records if r.error is None)
        return result.summary["n_queries"] - good


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path):
        self.args = args
        self.image = work / "image.jpg"
        self.image_kb = make_jpeg(self.image) / 1000
        self.body = chat_body(self.image.read_bytes(), QUESTION)
        self.data = work / "items.jsonl"
        write_dataset(self.data, self.image, args.requests)
        self._round = 0

    def job(self, path: str, url: str, n: int) -> Callable[[], Awaitable[int]]:
        """A zero-argument coroutine factory sending n requests by `path`; it returns the error count."""
        c = self.args.concurrency
        self._round += 1
        tag = f"r{self._round}-"
        if path == "bare":
            bodies = [self.body] * n

            async def bare() -> int:
                st = await bare_loop(url, bodies, c)
                return n - st.get("200", 0)
            return bare
        if path in ("vllm", "openai"):
            queries = make_queries(self.image, n, tag)  # built before the clock starts
            return lambda: runner_path(f"{path}/sim-model", url, queries, c)
        if path == "bedrock":
            queries = make_queries(self.image, n, tag)
            return lambda: runner_path(f"bedrock/{BEDROCK_MODEL}", url, queries, c)
        if path == "run":
            if n == self.args.requests:
                return lambda: full_run(url, self.data, c)
            small = self.data.with_name(f"warm{self._round}.jsonl")
            write_dataset(small, self.image, n)
            return lambda: full_run(url, small, c)
        raise ValueError(path)

    def measure(self, path: str, url: str, n: int) -> tuple[float, int]:
        job = self.job(path, url, n)
        t0 = time.perf_counter()
        errors = asyncio.run(job())
        return n / (time.perf_counter() - t0), errors


def profile_path(bench: Bench, path: str, url: str, n: int, top: int = 30) -> str:
    """cProfile of one path (event-loop thread only: to_thread work shows as queue/GIL waits)."""
    job = bench.job(path, url, n)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    asyncio.run(job())
    prof.disable()
    elapsed = time.perf_counter() - t0
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    buf.write("\n--- by cumulative time ---\n")
    stats.sort_stats("cumulative").print_stats(top)
    return f"{path} path under cProfile at 0 ms: {n} requests in {elapsed:.2f}s ({n / elapsed:.0f} req/s)\n" \
        + buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--latencies", default="0,100", help="server latencies in ms, comma-separated")
    p.add_argument("--repeats", type=int, default=2, help="timed rounds per path (best is reported)")
    p.add_argument("--warmup", type=int, default=200, help="requests per path before timing")
    p.add_argument("--paths", default=",".join(ALL_PATHS), help=f"subset of {','.join(ALL_PATHS)} (bare always)")
    p.add_argument("--openai-requests", type=int, default=1000, help="requests of the one openai measurement")
    p.add_argument("--profile", action="append", choices=("vllm", "run"), default=[],
                   help="also print a cProfile of this path at 0 ms (repeatable)")
    p.add_argument("--profile-only", action="store_true", help="skip the timed rounds (with --profile)")
    args = p.parse_args(argv)
    latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
    paths = ["bare"] + [x for x in args.paths.split(",") if x in ALL_PATHS and x not in ("bare", "openai")]
    with_openai = "openai" in args.paths.split(",")
    if args.profile_only:
        latencies = [0.0]

    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        bench = Bench(args, Path(tmp))
        print(f"image {bench.image_kb:.1f} KB, request body {len(bench.body) / 1000:.1f} KB, "
              f"{args.requests} requests, {args.concurrency} in flight, cache off, {args.repeats} rounds\n", flush=True)
        rows: list[tuple[float, str, float, float, int]] = []
        profile_text = ""
        for lat in latencies:
            with SimProcess("--latency-ms", f"{lat:g}") as sim:
                for path in paths + (["openai"] if with_openai else []):  # warm-up: server, imports, code paths
                    bench.measure(path, sim.url, args.warmup)
                if args.profile_only:
                    profile_text = "\n".join(profile_path(bench, x, sim.url, args.requests) for x in args.profile)
                    print(profile_text)
                    return 0
                best: dict[str, float] = {}
                errs: dict[str, int] = {}
                for r in range(args.repeats):
                    order = paths[r % len(paths):] + paths[:r % len(paths)]
                    if r % 2:
                        order.reverse()
                    for path in order:
                        rate, e = bench.measure(path, sim.url, args.requests)
                        print(f"  latency {lat:g} ms  round {r + 1}  {path:<7} {rate:8.0f} req/s  errors {e}",
                              flush=True)
                        best[path] = max(best.get(path, 0.0), rate)
                        errs[path] = errs.get(path, 0) + e
                    if r == 0 and with_openai:  # once, between the rounds
                        rate, e = bench.measure("openai", sim.url, args.openai_requests)
                        print(f"  latency {lat:g} ms  round 1  openai  {rate:8.0f} req/s  errors {e}"
                              f"  ({args.openai_requests} requests)", flush=True)
                        best["openai"], errs["openai"] = rate, e
                for path in paths + (["openai"] if with_openai else []):
                    rows.append((lat, path, best[path], best[path] / best["bare"], errs[path]))
                if args.profile and lat == 0.0:
                    profile_text = "\n".join(profile_path(bench, x, sim.url, args.requests) for x in args.profile)

        print(f"\n{'latency':>8}  {'path':<8} {'req/s':>8} {'vs bare':>8}  {'target':>8}  {'errors':>6}")
        ok = True
        for lat, path, rate, ratio, e in rows:
            target = ""
            goal = TARGETS.get(lat) if path == "vllm" else BEDROCK_TARGETS.get(lat) if path == "bedrock" else None
            if goal is not None:
                passed = ratio >= goal
                ok &= passed
                target = f">= {goal:.1f} {'ok' if passed else 'MISS'}"
            print(f"{lat:>6g}ms  {path:<8} {rate:8.0f} {ratio:8.2f}  {target:>8}  {e:>6}")
        print("\nvllm = Runner+vllm provider+Limiter+NullCache+ImagePipeline; run = evalkit.run_async end to end;"
              "\nopenai = Runner+openai/ provider (information only, one measurement);"
              "\nbedrock = Runner+bedrock/ Converse provider, each request SigV4-signed by botocore;"
              "\nreq/s: best of the rounds; ratio: against the best bare round of the same latency.")
        if profile_text:
            print("\n" + profile_text)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
