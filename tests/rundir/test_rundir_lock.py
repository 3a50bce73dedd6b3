"""One process per run directory: a second `evalkit run` or an `evalkit report` on a run directory in
use is refused at once, naming the process that holds it; the holder's work is untouched, and a lock
file left by a killed process blocks nobody.

evalkit 0.1.0 had no lock: two runs on one --out sent every request twice, and a report during a
run rewrote records.jsonl under it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_under_test import run_cli, start_cli
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.rundir.lock import LOCK_FILE, hold_run_dir
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 24  # queries


def wait_until_held(sim: SimThread, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    """Return once the first run has a request waiting at the simulator's gate: it is then mid-run, and
    stays so until the test releases the gate (no race with how fast either process starts)."""
    deadline = time.monotonic() + timeout
    while sim.held < 1:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first run never asked anything"
        time.sleep(0.02)


def valid_lines(path: Path) -> list[dict]:
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line terminated
    return [json.loads(x.decode("utf-8")) for x in lines[:-1]]


@pytest.fixture
def slow_run(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=21)
    key = answer_key_for("mcq", {"data": str(data)})
    sim = SimThread(SimConfig(answer_key=key)).start()
    argv = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
            "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
            "--concurrency", "2"]
    try:
        yield sim, argv, tmp_path / "run"
    finally:
        sim.close()


def test_a_second_run_on_the_same_out_is_refused_naming_the_first(slow_run):
    sim, argv, out = slow_run
    sim.hold(after=5)  # five answers, then the first run waits for the test
    first = start_cli(argv)
    try:
        wait_until_held(sim, first)
        second = run_cli(argv, timeout=120)
        dry = run_cli([*argv, "--dry-run"], timeout=120)  # counts and writes nothing: never refused
        still_running = first.poll() is None
    finally:
        sim.release()
        _, first_err = first.communicate(timeout=120)
    assert second.returncode == 2, second.stderr
    assert first.returncode == 0, first_err
    assert still_running, "the first run ended before the second was refused: the test proves nothing"
    message = second.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert f"run directory {out} is in use by evalkit process {first.pid} (started " in message
    assert "wait for it to finish or choose another --out" in message
    assert dry.returncode == 0, dry.stderr
    assert sim.counters.snapshot()["requests"] == N  # exactly one request per query
    records = valid_lines(out / "records.jsonl")
    assert sorted(r["query_id"] for r in records) == [f"q{i:05d}" for i in range(N)]
    assert json.loads((out / "summary.json").read_text())["complete"] is True
    again = run_cli(argv, timeout=120)  # once the first is done, the directory is free; nothing to ask
    assert again.returncode == 0, again.stderr
    assert sim.counters.snapshot()["requests"] == N


def test_report_during_a_run_is_refused_and_touches_nothing(slow_run):
    sim, argv, out = slow_run
    sim.hold(after=5)
    first = start_cli(argv)
    try:
        wait_until_held(sim, first)
        report = run_cli(["report", str(out)], timeout=120)
        judged = run_cli(["report", str(out), "--judge", "vllm/sim-model", "--judge-base-url", sim.url],
                         timeout=120)
        still_running = first.poll() is None
    finally:
        sim.release()
        _, first_err = first.communicate(timeout=120)
    for refused in (report, judged):
        assert refused.returncode == 2, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert f"is in use by evalkit process {first.pid} (started " in refused.stderr
    assert first.returncode == 0, first_err
    assert still_running, "the run ended before the reports were refused: the test proves nothing"
    assert sim.counters.snapshot()["requests"] == N
    records = valid_lines(out / "records.jsonl")
    assert len(records) == N and len({r["query_id"] for r in records}) == N
    after = run_cli(["report", str(out)], timeout=120)  # the run is over: the report runs
    assert after.returncode == 0, after.stderr


def test_a_lock_file_left_by_a_killed_run_blocks_nobody(slow_run):
    sim, argv, out = slow_run
    sim.hold(after=4)
    first = start_cli(argv)
    try:
        wait_until_held(sim, first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    holder = json.loads((out / LOCK_FILE).read_text())  # what the killed run left behind
    assert holder["pid"] == first.pid
    sim.release()
    again = run_cli(argv, timeout=120)
    assert again.returncode == 0, again.stderr
    records = valid_lines(out / "records.jsonl")
    assert sorted(r["query_id"] for r in records) == [f"q{i:05d}" for i in range(N)]
    assert json.loads((out / LOCK_FILE).read_text())["pid"] != first.pid


def test_the_lock_is_exclusive_within_one_process_and_released_on_errors(tmp_path):
    refused = pytest.raises(EvalkitError, match=rf"in use by evalkit process {os.getpid()} \(started ")
    with hold_run_dir(tmp_path / "run"), refused, hold_run_dir(tmp_path / "run"):
        pass
    with pytest.raises(RuntimeError), hold_run_dir(tmp_path / "run"):
        raise RuntimeError("boom")
    with hold_run_dir(tmp_path / "run"):  # released by the error above
        assert json.loads((tmp_path / "run" / LOCK_FILE).read_text())["pid"] == os.getpid()
