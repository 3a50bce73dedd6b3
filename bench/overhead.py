"""Everything around the network: each phase of a run per 1,000 queries, and whole runs against a
server that costs nothing, as ratios to a bare aiohttp loop and to a cold run.

The server is a canned one (bench/_canned.py, in its own process): it reads each request
body, sleeps the latency and returns a pre-encoded chat completion ("A".."D" in turn); it never
parses JSON or decodes an image, so its CPU per request is negligible and the client's own cost
shows. The data set is an `mcq` JSONL of --items questions over --images distinct ~30 KB JPEGs
(consecutive questions share a picture, as in MME-RealWorld), drawn once into --workdir.

Part 1, phases (in this process, each timed alone, wall and CPU, per 1,000 queries):
  start-up     a fresh interpreter importing evalkit.cli and evalkit.engine.evaluate, parser built
  load         evalkit.benchmarks.prepare.prepare("mcq", data=...): read, resolve images, expand
  cached ask   Runner (vllm/ provider, Limiter(32), ResponseCache already holding every answer,
               new ImagePipeline) over every query: keys, batched lookup, outcomes to the sink
  grade        make_record + grade for every outcome
  records      RunDir.append for every record (batched), close, then the final rewrite_records
  report       summarize + publish up to report.md (analysis with its bootstrap, summary.json)
  plots        the figures, drawn (matplotlib already imported, as a run's plot process has) and the
               same with the import paid here; and unchanged inputs (skipped)
Part 2, whole `evalkit run` subprocesses (process start to exit, start-up included):
  --latency-ms (200) and --concurrency (64): bare aiohttp loop (same body size, one session, a
  semaphore; timed before and after the runs, the better of the two is the baseline) vs
  `evalkit run mcq` through vllm/ and through openai/, fresh cache and run dir; client CPU
  seconds per 1,000 queries from wait4.
  --rerun-latency-ms (50) at the default concurrency (32): cold run; the same command again
  (a complete run directory, nothing changed: its outputs reused); a fresh --out with the warm
  cache (every answer from the cache, the figures copied from the cache folder). Ratios to the cold run;
  the two short runs are each timed --rerun-repeats (3) times and their median taken (a 1.4 s command
  on a shared machine is at the mercy of a few seconds' noise that a 12 s cold run averages out).

    .venv/bin/python bench/overhead.py [--items 5000] [--images 500] [--latency-ms 200]
        [--concurrency 64] [--rerun-latency-ms 50] [--rerun-repeats 3]
        [--parts phases,runs,rerun] [--workdir DIR]

Exit 0 when every target is met: cached ask >= 5,000 queries/s; summary.json and report.md
<= 0.5 s after the last answer, plots <= 1.5 s more; whole run >= 0.8 x bare for vllm/ and
openai/; the same command again <= 0.06 x the cold run, a fresh --out on the warm cache <= 0.12 x.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import inspect
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _canned import CannedServer, build_dataset
from _common import bare_loop, chat_body, env_without_keys

# the evalkit this script imports (PYTHONPATH may point at another checkout, e.g. to measure a
# baseline); `python -m evalkit.cli` runs from there, since -m puts the working directory first
ROOT = Path(importlib.util.find_spec("evalkit").origin).resolve().parents[1]  # type: ignore[arg-type]

TARGETS = {"cached_qps": 5000.0, "report_s": 0.5, "plots_s": 1.5, "run_ratio": 0.8, "rerun_ratio": 0.06,
           "fresh_ratio": 0.12}


# ------------------------------------------------------------------ part 1: phases


class Clock:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, str]] = []

    def time(self, name: str, fn: Callable[[], Any], note: str = "") -> Any:
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        self.add(name, time.perf_counter() - w, time.process_time() - c, note)
        return out

    def add(self, name: str, wall: float, cpu: float, note: str = "") -> None:
        self.rows.append((name, wall, cpu, note))
        print(f"  {name:<34} {wall:7.3f} s wall  {cpu:7.3f} s CPU  {note}", flush=True)


def startup_seconds(repeats: int = 3) -> tuple[float, float]:
    """Best wall time of a fresh interpreter doing nothing, and importing what `evalkit run` imports."""
    code = ("from evalkit.cli import build_parser; build_parser(['run', 'mcq']); "
            "import evalkit.engine.evaluate")
    best = {}
    for name, c in (("bare", "pass"), ("evalkit", code)):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", c], check=True, cwd=ROOT)
            times.append(time.perf_counter() - t)
        best[name] = min(times)
    return best["bare"], best["evalkit"]


def phases(args: argparse.Namespace, data: Path, work: Path) -> dict[str, float]:
    from evalkit.ask.rate_limiter import Limiter
    from evalkit.ask.runner import RetryPolicy, Runner
    from evalkit.ask.store.cache import ResponseCache
    from evalkit.benchmarks.prepare import prepare
    from evalkit.grading.grade import grade, make_record, summarize
    from evalkit.images.pipeline import ImagePipeline
    from evalkit.providers import create_provider, parse_spec
    from evalkit.report import figures, outputs, plots
    from evalkit.rundir.layout import RunDir

    n = args.items
    per_k = 1000 / n
    clock = Clock()
    out: dict[str, float] = {}
    print(f"\nPart 1: phases over {n} queries ({args.images} images); load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs", flush=True)
    bare, full = startup_seconds()
    clock.add("start-up (interpreter + imports)", full, 0.0, f"(bare interpreter {bare:.3f} s)")

    small = data.with_name("warm-up.jsonl")  # next to the data: image paths are relative to it
    small.write_text(data.read_text(encoding="utf-8").split("\n", 1)[0] + "\n", encoding="utf-8")
    prepare("mcq", {"data": str(small)})  # the benchmark's modules imported: load times the data alone
    prepared = clock.time("load (read, resolve, expand)", lambda: prepare("mcq", {"data": str(data)}))
    bench, queries = prepared.bench, prepared.queries

    with CannedServer(0.0) as server:
        env = {**env_without_keys(), "OPENAI_API_KEY": "sk-bench"}
        spec = parse_spec("vllm/sim-model", [server.url + "/v1"], env)

        async def ask_all(cache_dir: Path) -> list[Any]:
            outcomes: list[Any] = []
            provider = create_provider(spec, env, timeout_s=60)
            pipeline = ImagePipeline()
            cache = ResponseCache(cache_dir)
            runner = Runner(provider, limiter=Limiter(concurrency=32), cache=cache, pipeline=pipeline,
                            policy=RetryPolicy(max_attempts=3, timeout_s=60))
            try:
                await runner.run(queries, outcomes.append, workers=32)
            finally:
                await provider.close()
                cache.close()
                pipeline.close()
            return outcomes

        cache_dir = work / "phase-cache"
        shutil.rmtree(cache_dir, ignore_errors=True)
        cold = clock.time("cold ask (0 ms server; info)", lambda: asyncio.run(ask_all(cache_dir)))
        w0 = time.perf_counter()
        outcomes = clock.time("cached ask", lambda: asyncio.run(ask_all(cache_dir)))
        cached_s = time.perf_counter() - w0
    hits = sum(o.cached for o in outcomes)
    out["cached_qps"] = n / cached_s
    print(f"    cached ask: {hits}/{len(outcomes)} from the cache, {out['cached_qps']:,.0f} queries/s "
          f"(target >= {TARGETS['cached_qps']:,.0f}); cold errors {sum(not o.response.ok for o in cold)}")

    by_id = {q.id: q for q in queries}
    records = clock.time("grade", lambda: [grade(bench, o.query, make_record(o, spec.label), "official")
                                           for o in outcomes])
    run_dir = work / "phase-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir()
    rundir = RunDir(run_dir)

    def append_all() -> None:
        for r in records:
            rundir.append(r)
        rundir.close()

    clock.time("records: append (batched) + close", append_all)
    by_record = {r.query_id: r for r in records}
    ordered = [by_record[q] for q in by_id]
    w1, c1 = time.perf_counter(), time.process_time()
    rundir.rewrite_records(ordered)
    clock.add("records: final rewrite", time.perf_counter() - w1, time.process_time() - c1)

    marks: dict[str, float] = {}
    real_draw = figures.draw_all
    split = "plots" in inspect.signature(outputs.publish).parameters  # report.md first, then the plots

    def timed_draw(*a: Any, **k: Any) -> Any:
        marks["draw_start"], marks["draw_cpu"] = time.perf_counter(), time.process_time()
        try:
            return real_draw(*a, **k)
        finally:
            marks["draw_end"], marks["draw_cpu_end"] = time.perf_counter(), time.process_time()

    def finish() -> None:
        """What a run does after its last answer, in engine/evaluate.py's order."""
        marks["start"], marks["cpu"] = time.perf_counter(), time.process_time()
        opts = {"data": str(data)}
        if not split:  # an older evalkit: records rewritten first, report.md after the plots
            rundir.rewrite_records(ordered)
        summary = summarize(bench, ordered, model=spec.label, mode="official", n_items=len(prepared.items),
                            n_queries=n, options=opts, config={}, judge=None, queries=by_id)
        if split:
            analysis = outputs.publish(rundir, summary, bench, ordered, opts, plots=False)
            marks["report"], marks["report_cpu"] = time.perf_counter(), time.process_time()
            rundir.rewrite_records(ordered)
            outputs.draw_plots(rundir, summary, analysis)
        else:
            outputs.publish(rundir, summary, bench, ordered, opts)
            marks["report"], marks["report_cpu"] = time.perf_counter(), time.process_time()
        marks["end"], marks["end_cpu"] = time.perf_counter(), time.process_time()

    figures.draw_all = timed_draw
    try:
        # a run's plot process imports matplotlib while the run asks; here it is imported beforehand
        preloaded = args.preload and hasattr(plots, "pyplot")  # (an older evalkit has no plots.pyplot)
        if preloaded:
            plots.pyplot()
        finish()
        report_s = marks["report"] - marks["start"]
        clock.add("report (summary.json + report.md)", report_s, marks["report_cpu"] - marks["cpu"],
                  "summarize, analyze (bootstrap), write" + ("" if split else "; rewrite, plots first"))
        draw_s = marks["draw_end"] - marks["draw_start"]
        plots_s = marks["end"] - marks["report"] if split else draw_s
        clock.add("plots" + (" (matplotlib preloaded)" if preloaded else " (import included)"),
                  draw_s, marks["draw_cpu_end"] - marks["draw_cpu"], f"{len(list((run_dir / 'plots').glob('*.png')))} PNGs")
        finish()
        clock.add("plots, inputs unchanged (skipped)", marks["draw_end"] - marks["draw_start"],
                  marks["draw_cpu_end"] - marks["draw_cpu"])
    finally:
        figures.draw_all = real_draw
    out["report_s"] = report_s
    out["plots_s"] = plots_s
    print(f"    after the last answer: summary.json and report.md at {report_s:.3f} s (target <= "
          f"{TARGETS['report_s']}); records rewritten and plots drawn {plots_s:.3f} s later (target <= "
          f"{TARGETS['plots_s']})")
    print(f"\n  per 1,000 queries{'':17} {'wall s':>8} {'CPU s':>8}")
    for name, wall, cpu, _note in clock.rows:
        fixed = name.startswith("start-up") or name.startswith("plots") or name.startswith("report")
        scale = 1.0 if fixed else per_k
        print(f"  {name:<34} {wall * scale:8.3f} {cpu * scale:8.3f}{'  (per run, not per 1,000)' if fixed else ''}")
    return out


# ------------------------------------------------------------------ part 2: whole runs


def evalkit_run(model: str, data: Path, url: str, out: Path, cache: Path, *extra: str
                ) -> tuple[float, float, int, str]:
    """`python -m evalkit.cli run mcq ...` from start to exit: (wall s, CPU s of the child, exit code, stderr)."""
    env = {**env_without_keys(), "OPENAI_API_KEY": "sk-bench"}
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", model, "--data", str(data),
           "--base-url", url + "/v1", "--out", str(out), "--cache-dir", str(cache), "--no-progress", *extra]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode, err


def whole_runs(args: argparse.Namespace, data: Path, work: Path) -> dict[str, float]:
    n = args.items
    out: dict[str, float] = {}
    image = sorted((data.parent / "images").glob("*.jpg"))[0]
    body = chat_body(image.read_bytes(), "Question 0: what is shown in the picture?\nA. a cat\nB. a dog\n"
                     "C. a tree\nD. a car\nAnswer with the option's letter.")
    print(f"\nPart 2: whole runs, {n} queries, server latency {args.latency_ms:g} ms, "
          f"{args.concurrency} in flight (body {len(body) / 1000:.1f} KB); load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    rows = []
    with CannedServer(args.latency_ms) as server:
        asyncio.run(bare_loop(server.url, [body] * 200, args.concurrency))  # warm-up
        bare_rates: list[float] = []

        def bare() -> None:
            t = time.perf_counter()
            statuses = asyncio.run(bare_loop(server.url, [body] * n, args.concurrency))
            bare_rates.append(n / (time.perf_counter() - t))
            print(f"  bare aiohttp loop         {bare_rates[-1]:7.1f} req/s  statuses {statuses}", flush=True)

        bare()  # before and after the evalkit runs: the best of the two is the baseline (noisy machines)
        for provider in args.providers.split(","):
            run_dir = work / f"run-{provider}"
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.rmtree(work / f"cache-{provider}", ignore_errors=True)
            wall, cpu, code, err = evalkit_run(f"{provider}/sim-model", data, server.url, run_dir,
                                               work / f"cache-{provider}", "--concurrency", str(args.concurrency))
            rows.append((provider, wall, n / wall, 0.0, cpu * 1000 / n, code))
            print(f"  evalkit run {provider + '/':<13} {n / wall:7.1f} req/s  {wall:6.2f} s  "
                  f"client CPU {cpu:.2f} s ({cpu * 1000 / n:.3f} s per 1,000)  exit {code}", flush=True)
            if code != 0:
                print(err[-2000:])
        bare()
    bare_rate = max(bare_rates)
    rows = [(p, w, r, r / bare_rate, c, code) for p, w, r, _, c, code in rows]
    out.update({f"ratio_{p}": ratio for p, _, _, ratio, _, _ in rows})
    print(f"\n  bare: best of {', '.join(f'{r:.1f}' for r in bare_rates)} req/s")
    print(f"  {'path':<10} {'wall s':>7} {'req/s':>7} {'vs bare':>8}  {'CPU s/1,000':>11}  target")
    for provider, wall, rate, ratio, cpu_k, code in rows:
        ok = ratio >= TARGETS["run_ratio"] and code == 0
        print(f"  {provider:<10} {wall:7.2f} {rate:7.1f} {ratio:8.2f}  {cpu_k:11.3f}  "
              f">= {TARGETS['run_ratio']} {'ok' if ok else 'MISS'}")
    return out


def rerun(args: argparse.Namespace, data: Path, work: Path) -> dict[str, float]:
    n = args.items
    print(f"\nPart 3: cached re-run, {n} queries, server latency {args.rerun_latency_ms:g} ms, "
          f"default concurrency (32)", flush=True)
    out: dict[str, float] = {}
    cache, run_a, run_b = work / "rerun-cache", work / "rerun-a", work / "rerun-b"
    for p in (cache, run_a, run_b):
        shutil.rmtree(p, ignore_errors=True)
    with CannedServer(args.rerun_latency_ms) as server:
        walls: dict[str, list[float]] = {}
        runs = [("cold", run_a)] + [("same command again", run_a)] * args.rerun_repeats \
            + [("fresh --out, warm cache", run_b.with_name(f"{run_b.name}-{k}")) for k in range(args.rerun_repeats)]
        for name, run_dir in runs:
            wall, cpu, code, err = evalkit_run("vllm/sim-model", data, server.url, run_dir, cache)
            walls.setdefault(name, []).append(wall)
            print(f"  {name:<26} {wall:6.2f} s  client CPU {cpu:5.2f} s  exit {code}", flush=True)
            if code != 0:
                print(err[-2000:])
    results = {name: statistics.median(times) for name, times in walls.items()}
    if args.rerun_repeats > 1:
        print(f"  medians: same command again {results['same command again']:.2f} s, "
              f"fresh --out {results['fresh --out, warm cache']:.2f} s")
    cold = results["cold"]
    out["rerun_ratio"] = results["same command again"] / cold
    out["fresh_ratio"] = results["fresh --out, warm cache"] / cold
    print(f"  same command again / cold:      {out['rerun_ratio']:.3f}  (target <= {TARGETS['rerun_ratio']})")
    print(f"  fresh --out, warm cache / cold: {out['fresh_ratio']:.3f}  (target <= {TARGETS['fresh_ratio']})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--items", type=int, default=5000)
    p.add_argument("--images", type=int, default=500)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--rerun-latency-ms", type=float, default=50.0)
    p.add_argument("--rerun-repeats", type=int, default=3, help="times each short re-run is timed (median)")
    p.add_argument("--providers", default="vllm,openai")
    p.add_argument("--parts", default="phases,runs,rerun")
    p.add_argument("--no-preload", dest="preload", action="store_false",
                   help="phases: time the plots with the matplotlib import included")
    p.add_argument("--workdir", default=None, help="where the images are kept (default: a folder in /tmp)")
    args = p.parse_args(argv)
    folder = Path(args.workdir or Path(tempfile.gettempdir()) / f"evalkit-overhead-{args.images}")
    t = time.perf_counter()
    data = build_dataset(folder, args.items, args.images)
    print(f"data set: {args.items} questions over {args.images} images in {folder} "
          f"({time.perf_counter() - t:.1f} s to prepare)")
    parts = set(args.parts.split(","))
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="evalkit-overhead-") as tmp:
        work = Path(tmp)
        if "phases" in parts:
            results.update(phases(args, data, work))
        if "runs" in parts:
            results.update(whole_runs(args, data, work))
        if "rerun" in parts:
            results.update(rerun(args, data, work))
    checks = {
        "cached_qps": lambda v: v >= TARGETS["cached_qps"],
        "report_s": lambda v: v <= TARGETS["report_s"],
        "plots_s": lambda v: v <= TARGETS["plots_s"],
        "rerun_ratio": lambda v: v <= TARGETS["rerun_ratio"],
        "fresh_ratio": lambda v: v <= TARGETS["fresh_ratio"],
    }
    checks.update({k: (lambda v: v >= TARGETS["run_ratio"]) for k in results if k.startswith("ratio_")})
    print("\nTargets:")
    ok = True
    for key, check in checks.items():
        if key in results:
            passed = check(results[key])
            ok &= passed
            print(f"  {key:<14} {results[key]:10.3f}  {'ok' if passed else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
