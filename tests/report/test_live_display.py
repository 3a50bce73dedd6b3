"""The live display tells the truth at any width: count, ETA and elapsed survive 80 columns, retries
and 429s are counted as they happen, and a run whose stderr is not a terminal prints plain lines."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

from cli_under_test import REPO, checkout_under_test, run_main
from rich.console import Console
from synthetic_data import make_mcq_jsonl

from evalkit.core.types import Outcome, Query, Response, Usage
from evalkit.report.progress import Field, RunProgress, fit_fields
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


class Stats:
    retries = 12
    rate_limited = 5
    capacity_refused = 0


def _outcome(cached: bool = False) -> Outcome:
    q = Query(id="q", item_id="q", base_id="q", variant={}, messages=(), gold="A")
    return Outcome(q, Response(text="A", usage=Usage(100, 2)), "k", cached)


def test_at_80_columns_count_eta_and_elapsed_survive():
    clock = Clock()
    p = RunProgress(5440, "if-bench · openai/gpt-4o-2024-08-06", Console(width=80), False, counters=Stats(),
                    spent=lambda: 1.2345, clock=clock)
    for _ in range(1234):
        clock.t += 0.05
        p.advance(_outcome())
    line = p.line(80)
    assert len(line) <= 80
    assert "1,234/5,440" in line and "ETA 3:30" in line and "1:01 elapsed" in line, line
    wide = p.line(200)
    assert "retries 12 (429: 5)" in wide and "$1.2345" in wide and "if-bench" in wide and "━" in wide


def test_fields_are_dropped_least_important_first():
    fields = [Field("label", 9), Field("1/2", 0), Field("ETA 0:01", 1)]
    assert fit_fields(fields, 14) == "1/2 · ETA 0:01"
    assert fit_fields(fields, 5) == "1/2"


def test_a_redirected_run_prints_plain_progress_lines(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 20, seed=4)
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), latency_s=0.05,
                       faults=SimFaults(rate=0.3, kinds=("429",), retry_after=0.0, seed=2))
    with SimThread(config) as sim:
        done = run_main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                        "--out", str(tmp_path / "run"), "--concurrency", "2"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("evalkit: mcq · vllm/sim-model · ")]
    assert len(lines) >= 5, done.stderr  # every 10%, and the end
    assert "20/20" in lines[-1] and "ETA 0:00" in lines[-1]
    assert any("(429: 0)" not in ln for ln in lines), "rate limits are counted as they come"


def _read_until(fd: int, proc: subprocess.Popen, seen: bytes, done, timeout: float = 120) -> bytes:  # noqa: ANN001
    """Read the terminal until done(text without escapes) says so, the child closes it, or it exits."""
    deadline = time.monotonic() + timeout
    while not done(_plain(seen)):
        assert time.monotonic() < deadline, _plain(seen)[-2000:]
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    return seen


def _plain(seen: bytes) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode("utf-8", "replace"))


MID_RUN = re.compile(r"10/30 · [^\r\n]*ETA \d+:\d\d")


def test_a_terminal_at_80_columns_shows_count_and_eta(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 30, seed=4)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.hold(after=10)  # ten answers, then the run waits at the gate until the terminal has shown them
        # (its own cache: the checkout's ./cache may hold these answers from a run at the same port)
        main, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        env = {**os.environ, "PYTHONPATH": str(checkout_under_test()), "TERM": "xterm-256color", "COLUMNS": "80"}
        env.pop("NO_COLOR", None)
        code = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
                "from evalkit.cli import main; sys.exit(main(sys.argv[1:]))")
        proc = subprocess.Popen([sys.executable, "-c", code, "run", "mcq", "--model", "vllm/sim-model", "--base-url",
                                 sim.url, "--data", str(data), "--out", str(tmp_path / "run"), "--concurrency", "2",
                                 "--cache-dir", str(tmp_path / "cache"), "--no-plots"], stdin=child, stdout=child, stderr=child, env=env, cwd=REPO)
        os.close(child)
        try:
            # two frames showing 10 of 30 (the first one whole), drawn while the run waits
            seen = _read_until(main, proc, b"", lambda text: text.count("10/30") >= 2)
            mid_run = MID_RUN.search(_plain(seen)) is not None and proc.poll() is None
        finally:
            sim.release()
        seen = _read_until(main, proc, seen, lambda text: False)  # to the end
        proc.wait(timeout=120)
        os.close(main)
    text = _plain(seen)
    assert proc.returncode == 0, text[-2000:]
    assert mid_run, text[-2000:]  # the count and ETA at 80 columns, while the run waited with 10 of 30 done
    assert "30/30" in text, text[-2000:]
