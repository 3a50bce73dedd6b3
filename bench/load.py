"""The 20,000-query load: `evalkit run mcq` at 128 in flight against a faulty simulated server.

Three runs, each with its own server process (this script with --serve: the simulator's app, 200 ms
latency) and `evalkit run` in a child process, so client and server share no GIL:

  baseline   no faults
  faults     30 % of requests fail: 500, 503, drop, hang, malformed (chosen uniformly)
  +429       30 % of requests fail: the same kinds and 429 with Retry-After: 1

For each: queries recorded (every one exactly once, from records.jsonl), requests in flight at the
server (sampled every --sample-ms: mean over the ask phase and max), peak RSS of the `evalkit run`
process (wait4), wall time, and throughput against the ideal concurrency / latency (640 q/s) and
against the baseline run of the same invocation.

    .venv/bin/python bench/load.py [--queries 20000] [--images 300] [--concurrency 128] [--latency-ms 200]
        [--fault-rate 0.3] [--timeout 2] [--hang-s 60] [--max-attempts 20] [--runs baseline,faults,429]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import env_without_keys, free_port, http_json, stop_process

ROOT = Path(__file__).resolve().parent.parent
FAULTS = "500,503,drop,hang,malformed"
RUNS = {"baseline": ("no faults", None), "faults": (FAULTS, FAULTS), "429": (FAULTS + ",429", FAULTS + ",429")}


# ------------------------------------------------------------------ the data


def draw_images(folder: Path, n: int) -> None:
    """n distinct 256x192 JPEGs (noise, a colour wash and shapes; about 10 KB each), kept if present."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        path = folder / f"img{i:04d}.jpg"
        if path.exists():
            continue
        rng = random.Random(i)
        noise = Image.effect_noise((256, 192), 40).convert("RGB")
        img = Image.blend(noise, Image.new("RGB", noise.size, tuple(rng.randrange(256) for _ in range(3))), 0.7)
        draw = ImageDraw.Draw(img)
        for _ in range(6):
            x0, y0 = rng.randrange(230), rng.randrange(170)
            box = (x0, y0, x0 + rng.randrange(10, 90), y0 + rng.randrange(10, 70))
            (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=tuple(rng.randrange(256) for _ in range(3)))
        img.save(path, "JPEG", quality=80)


def write_questions(path: Path, n: int, images: int) -> None:
    """n four-option questions, consecutive ones on the same picture (as in MME-RealWorld)."""
    colours = ["red", "green", "blue", "yellow", "purple", "orange", "cyan", "white"]
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            options = dict(zip("ABCD", rng.sample(colours, 4), strict=True))
            f.write(json.dumps({"id": f"q{i:05d}", "image": f"images/img{i * images // n:04d}.jpg",
                                "question": f"Question {i}: which colour dominates?", "options": options,
                                "answer": "ABCD"[rng.randrange(4)]}) + "\n")


# ------------------------------------------------------------------ the server process (--serve)


def serve(args: argparse.Namespace) -> None:
    """The simulator's app with its answer key for the data, plus a light counters route.

    handler_cancellation: a request the client gave up on (its timeout hit a hang) leaves the
    server when the client closes the connection, as with a real server, so "in flight" here is
    what the client has outstanding. /load/counters leaves out the per-key dict (20,000 entries)
    that /sim/counters sends, which would cost the server more than the sampling measures.
    """
    from aiohttp import web

    from evalkit.sim.from_bench import answer_key_for
    from evalkit.sim.machinery.faults import SimFaults
    from evalkit.sim.machinery.state import STATE
    from evalkit.sim.server import SimConfig, build_app

    kinds = tuple(k for k in args.fault_kinds.split(",") if k)
    faults = SimFaults(rate=args.fault_rate if kinds else 0.0, kinds=kinds, retry_after=1.0, hang_s=args.hang_s,
                       seed=args.seed)
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": args.data}), faults=faults,
                       latency_s=args.latency_ms / 1000.0)

    async def main() -> None:
        app = build_app(config)
        counters = app[STATE].counters

        async def light(request: web.Request) -> web.Response:
            out: dict[str, Any] = {"requests": counters.requests, "completions": counters.completions,
                                   "in_flight": counters.in_flight, "max_in_flight": counters.max_in_flight}
            if request.query.get("full"):
                snap = counters.snapshot()
                per_key = snap.pop("per_key")
                out = {**snap, "keys": len(per_key), "answered_twice": sum(v > 1 for v in per_key.values())}
            return web.json_response(out)

        app.router.add_get("/load/counters", light)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", args.port).start()
        try:
            await asyncio.Event().wait()
        finally:
            app[STATE].shutdown()
            await runner.cleanup()

    asyncio.run(main())


class Server:
    """This script with --serve in a child process; always killed."""

    def __init__(self, data: Path, args: argparse.Namespace, kinds: str | None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", "--port", str(self.port),
                    "--data", str(data), "--latency-ms", f"{args.latency_ms:g}", "--fault-rate", f"{args.fault_rate:g}",
                    "--fault-kinds", kinds or "", "--hang-s", f"{args.hang_s:g}", "--seed", str(args.seed)]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(self.cmd, cwd=str(ROOT), env=child_env(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300  # the answer key prepares every query and fingerprints every image
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                self.close()
                raise RuntimeError(f"server exited with {self.proc.returncode}: {err.strip()[-2000:]}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1.0).read()
                return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("server did not answer /health within 300 s")
            time.sleep(0.2)

    def counters(self, full: bool = False) -> dict[str, Any]:
        return http_json(self.url + "/load/counters" + ("?full=1" if full else ""), timeout=5.0)

    def close(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)

    def __exit__(self, *exc: object) -> None:
        self.close()


def child_env() -> dict[str, str]:
    """No provider keys or URLs from the caller; this checkout (or PYTHONPATH's) importable from any cwd."""
    return {**env_without_keys(), "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT), "MPLBACKEND": "Agg"}


# ------------------------------------------------------------------ one run


@dataclass
class Result:
    name: str
    kinds: str
    wall_s: float = 0.0
    exit_code: int = 0
    maxrss_mb: float = 0.0
    cpu_s: float = 0.0  # the evalkit run process's user + system CPU time (os.wait4)
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (s since start, in flight, answered)
    full_until: int = 0  # samples taken while at least `concurrency` queries were still unanswered
    server: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    unique: int = 0
    missing: int = 0
    errors: int = 0
    correct: int = 0

    def window(self) -> list[tuple[float, int, int]]:
        """From the first request until fewer than `concurrency` queries are left to answer: the only
        time the client can have them all in flight (the last few, in long backoffs, cannot)."""
        start = next((i for i, (_, f, a) in enumerate(self.samples) if f or a), len(self.samples))
        return self.samples[start:self.full_until]

    @property
    def mean_in_flight(self) -> float:
        window = self.window()
        return statistics.mean(f for _, f, _ in window) if window else 0.0

    @property
    def max_in_flight(self) -> int:
        return max((f for _, f, _ in self.samples), default=0)

    def tail_s(self) -> float:
        """Seconds from the end of the window to the last sample with a request in flight."""
        busy = [t for t, f, _ in self.samples if f]
        window = self.window()
        return max(0.0, busy[-1] - window[-1][0]) if busy and window else 0.0

    def throughput(self) -> float:
        return (self.records - self.errors) / self.wall_s if self.wall_s else 0.0


def run_once(name: str, label: str, kinds: str | None, data: Path, work: Path, args: argparse.Namespace,
             n: int) -> Result:
    out = work / f"run-{name}"
    res = Result(name, label)
    with Server(data, args, kinds) as server:
        cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model", "--base-url", server.url,
               "--data", str(data), "--out", str(out), "--no-cache", "--no-progress",
               "--concurrency", str(args.concurrency), "--timeout", f"{args.timeout:g}",
               "--max-attempts", str(args.max_attempts)]
        log = (work / f"run-{name}.log").open("wb")
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=str(work), env=child_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - started > args.run_timeout:
                    raise TimeoutError(f"{name}: evalkit run did not finish within {args.run_timeout:g} s")
                snap = server.counters()
                res.samples.append((time.monotonic() - started, snap["in_flight"], snap["completions"]))
                if snap["completions"] < n - args.concurrency:
                    res.full_until = len(res.samples)
                time.sleep(args.sample_ms / 1000.0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            log.close()
        res.wall_s = time.monotonic() - started
        res.exit_code = os.waitstatus_to_exitcode(status)
        proc.returncode = res.exit_code
        res.maxrss_mb = usage.ru_maxrss / 1024.0
        res.cpu_s = usage.ru_utime + usage.ru_stime
        res.server = server.counters(full=True)
    ids = []
    path = out / "records.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            ids.append(rec["query_id"])
            res.errors += rec["error"] is not None
            res.correct += bool(rec["correct"])
    res.records, res.unique = len(ids), len(set(ids))
    res.missing = n - len(set(ids) & {f"q{i:05d}" for i in range(n)})
    if res.exit_code != 0:
        tail = (work / f"run-{name}.log").read_text(errors="replace").strip().splitlines()[-5:]
        print(f"  {name}: evalkit run exited {res.exit_code}: " + " | ".join(tail), flush=True)
    return res


# ------------------------------------------------------------------ main


def report(results: list[Result], n: int, args: argparse.Namespace) -> bool:
    ideal = args.concurrency / (args.latency_ms / 1000.0)
    base = next((r for r in results if r.name == "baseline"), None)
    ok = True

    def row(label: str, cells: list[str], target: str = "") -> None:
        print(f"{label:<30}" + "".join(f"{c:>16}" for c in cells) + (f"   {target}" if target else ""))

    def check(label: str, values: list[Any], passed: list[bool], target: str) -> None:
        nonlocal ok
        ok = ok and all(passed)
        marks = " ".join("ok" if p else "MISS" for p in passed)
        row(label, [str(v) for v in values], f"{target}: {marks}")

    print()
    row("", [r.name for r in results])
    row("faults", [f"{args.fault_rate:.0%}" if r.name != "baseline" else "none" for r in results])
    check("queries recorded", [r.records for r in results], [r.records == n for r in results], f"= {n:,}")
    check("  distinct, none missing", [f"{r.unique}, {r.missing}" for r in results],
          [r.unique == n and r.missing == 0 for r in results], "exactly once")
    row("  answered / errors", [f"{r.records - r.errors} / {r.errors}" for r in results])
    row("  correct", [r.correct for r in results])
    row("exit code", [r.exit_code for r in results])
    row("server requests", [r.server.get("requests", 0) for r in results])
    row("  faults injected", [sum(r.server.get("faults", {}).values()) for r in results])
    for kind in ("500", "503", "drop", "hang", "malformed", "429"):
        if any(kind in r.server.get("faults", {}) for r in results):
            row(f"    {kind}", [r.server.get("faults", {}).get(kind, 0) for r in results])
    row("  completions (answered twice)", [f"{r.server.get('completions', 0)} ({r.server.get('answered_twice', 0)})"
                                           for r in results])
    check("in flight, mean", [f"{r.mean_in_flight:.1f}" for r in results],
          [r.mean_in_flight >= args.min_in_flight for r in results], f">= {args.min_in_flight:g}")
    row("in flight, max sampled (ever)", [f"{r.max_in_flight} ({r.server.get('max_in_flight', 0)})" for r in results])
    row("client CPU s (ms per query)", [f"{r.cpu_s:.1f} ({1000 * r.cpu_s / max(1, r.records):.2f})" for r in results])
    check("peak RSS of evalkit run, MB", [f"{r.maxrss_mb:.0f}" for r in results],
          [r.maxrss_mb < args.rss_limit_mb for r in results], f"< {args.rss_limit_mb:g}")
    row("wall s", [f"{r.wall_s:.1f}" for r in results])
    row("  of which the last queries", [f"{r.tail_s():.1f}" for r in results])
    row("answered queries / s", [f"{r.throughput():.0f}" for r in results])
    row(f"  vs ideal {ideal:.0f} q/s", [f"{r.throughput() / ideal:.2f}" for r in results])
    if base is not None and base.throughput():
        row("  vs baseline", [f"{r.throughput() / base.throughput():.2f}" for r in results])
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=20_000)
    p.add_argument("--images", type=int, default=300)
    p.add_argument("--concurrency", type=int, default=128)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--fault-rate", type=float, default=0.3)
    p.add_argument("--timeout", type=float, default=2.0, help="evalkit's --timeout, seconds per request")
    p.add_argument("--hang-s", type=float, default=60.0, help="how long an injected hang lasts")
    p.add_argument("--max-attempts", type=int, default=20, help="evalkit's --max-attempts")
    p.add_argument("--runs", default="baseline,faults,429", help="which of baseline,faults,429")
    p.add_argument("--sample-ms", type=float, default=100.0, help="how often the server's counters are read")
    p.add_argument("--min-in-flight", type=float, default=100.0, help="target: mean requests in flight")
    p.add_argument("--rss-limit-mb", type=float, default=500.0)
    p.add_argument("--run-timeout", type=float, default=1200.0, help="give up on one evalkit run after this long")
    p.add_argument("--workdir", default=None, help="keep images, data and runs here (default: a temporary folder)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--data", default="", help=argparse.SUPPRESS)
    p.add_argument("--fault-kinds", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args)
        return 0
    names = [x.strip() for x in args.runs.split(",") if x.strip()]
    unknown = [x for x in names if x not in RUNS]
    if unknown:
        p.error(f"unknown run(s) {', '.join(unknown)}; expected some of {', '.join(RUNS)}")
    n, images = args.queries, max(1, min(args.images, args.queries))

    with tempfile.TemporaryDirectory(prefix="evalkit-bench-load-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        draw_images(work / "images", images)
        data = work / f"questions-{n}-{images}.jsonl"
        write_questions(data, n, images)
        print(f"{n:,} questions over {images} images; server latency {args.latency_ms:g} ms, its own process; "
              f"evalkit run --concurrency {args.concurrency} --timeout {args.timeout:g} "
              f"--max-attempts {args.max_attempts}; hangs last {args.hang_s:g} s", flush=True)
        results = []
        for name in names:
            label, kinds = RUNS[name]
            print(f"  {name}: {label} ...", flush=True)
            results.append(run_once(name, label, kinds, data, work, args, n))
        return 0 if report(results, n, args) else 1


if __name__ == "__main__":
    sys.exit(main())
