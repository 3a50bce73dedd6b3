"""5,000 queries through the simulated batch APIs: wall time and peak memory of `evalkit run --batch`,
against a live run of the same queries measured in the same invocation (machines here are noisy).

For each provider (openai, anthropic, google): the simulator (in its own process, its batches end at
once) and `evalkit run mcq --batch` in a child process; then the same data live against a fresh
cache. Printed: wall seconds, peak RSS of the evalkit process (wait4), requests and batches at the
server, and the ratios batch/live.

    .venv/bin/python bench/batch.py [--queries 5000] [--images 300] [--providers openai,anthropic,google]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import free_port, http_json, stop_process
from load import draw_images, write_questions

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"OPENAI_API_KEY": "sk-bench", "ANTHROPIC_API_KEY": "sk-ant-bench", "GEMINI_API_KEY": "g-bench"}


def serve(data: str, port: int) -> None:
    from aiohttp import web

    from evalkit.sim.from_bench import answer_key_for
    from evalkit.sim.server import SimConfig, build_app

    async def main() -> None:
        app = build_app(SimConfig(answer_key=answer_key_for("mcq", {"data": data})))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(main())


def measure(cmd: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of one `evalkit` child."""
    env = {**os.environ, **KEYS, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        sys.stderr.write(proc.stderr.read().decode()[-2000:] if proc.stderr else "")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--providers", default="openai,anthropic,google")
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--data", default="")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    if args.serve:
        serve(args.data, args.port)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        draw_images(work / "images", args.images)
        data = work / "data.jsonl"
        write_questions(data, args.queries, args.images)
        print(f"{args.queries} queries over {args.images} images; batch vs live, same machine, same run")
        print(f"{'provider':<10} {'mode':<6} {'wall s':>8} {'peak MB':>8} {'requests':>9} {'batches':>8} {'exit':>5}")
        for provider in args.providers.split(","):
            port = free_port()
            server = subprocess.Popen([sys.executable, __file__, "--serve", "--data", str(data), "--port", str(port)],
                                      cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)},
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    try:
                        http_json(url + "/sim/counters")
                        break
                    except OSError:
                        time.sleep(0.1)
                base = url + "/v1" if provider == "openai" else url
                rows = {}
                for mode in ("batch", "live"):
                    before = http_json(url + "/sim/counters")
                    cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", f"{provider}/sim-model",
                           "--data", str(data), "--base-url", base, "--out", str(work / f"{provider}-{mode}"),
                           "--cache-dir", str(work / f"cache-{provider}-{mode}"), "--no-progress", "--no-plots",
                           "--concurrency", "64"] + (["--batch"] if mode == "batch" else [])
                    wall, rss, code = measure(cmd, work)
                    after = http_json(url + "/sim/counters")
                    requests = after["requests"] - before["requests"]
                    batches = after["batch"]["batches"] - before["batch"]["batches"]
                    rows[mode] = (wall, rss)
                    print(f"{provider:<10} {mode:<6} {wall:>8.1f} {rss:>8.0f} {requests:>9} {batches:>8} {code:>5}")
                (bw, br), (lw, lr) = rows["batch"], rows["live"]
                print(f"{provider:<10} ratio  {bw / lw:>8.2f} {br / lr:>8.2f}   (batch / live)")
            finally:
                stop_process(server)


if __name__ == "__main__":
    main()
