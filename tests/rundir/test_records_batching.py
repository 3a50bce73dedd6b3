"""records.jsonl in batches: buffered appends reach the file within 100 ms, at flush/close/exit and
on SIGINT/SIGTERM (engine/shutdown.on_signals); immediate mode (--no-cache) writes each line as it
arrives; the line format is 0.1.0's, byte for byte."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from synthetic_data import FIXTURES, REPO

from evalkit.core.record import Record
from evalkit.rundir.layout import FLUSH_INTERVAL_S, RunDir, record_line

V010_RECORDS = sorted((FIXTURES / "v010").glob("*/runs/*/records.jsonl"))


def rec(i: int, **kw) -> Record:
    return Record(query_id=f"q{i}", item_id=f"q{i}", base_id=f"q{i}", variant={}, model="m", request_key=f"k{i}",
                  response="Answer: A — ü", gold="A", parsed="A", parse_method="rule", correct=True, **kw)


def lines(rundir: RunDir) -> list[str]:
    path = rundir.records_path
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def flusher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "evalkit-records-flush" and t.is_alive()]


class StillClock:
    """A RunDir's clock that stands still until the test moves it, and counts how often it is read: the
    flusher reads it each time it weighs whether its batch is due, so a test can wait for that to happen."""

    def __init__(self, t: float = 1000.0) -> None:
        self._t = t
        self._reads = 0
        self._cond = threading.Condition()

    def __call__(self) -> float:
        with self._cond:
            self._reads += 1
            self._cond.notify_all()
            return self._t

    def set(self, t: float) -> None:
        with self._cond:
            self._t = t

    def read_twice(self, timeout: float = 60.0) -> None:
        """Return once the time has been read twice more (the flusher looked again, and went on)."""
        with self._cond:
            start = self._reads
            assert self._cond.wait_for(lambda: self._reads >= start + 2, timeout), "the flusher did not look again (it wrote the batch early, or stopped)"


def wait_for_lines(rundir: RunDir, n: int, timeout: float = 60.0) -> None:
    """Poll for an event (n lines in the file); the deadline is a safety net that costs nothing when it comes."""
    deadline = time.monotonic() + timeout
    while len(lines(rundir)) < n:
        assert time.monotonic() < deadline, f"{len(lines(rundir))} lines, not {n}"
        time.sleep(0.005)


def test_appends_are_buffered_until_the_interval(tmp_path):
    # (the flusher sleeps in real seconds what the clock says is left, so the interval is kept short here)
    clock = StillClock(1000.0)
    rundir = RunDir(tmp_path, flush_interval_s=0.5, clock=clock)
    for i in range(5):
        rundir.append(rec(i))
    clock.set(1000.0 + 0.499)
    clock.read_twice()  # the flusher weighed the batch at 0.499 s: not due
    assert lines(rundir) == []  # nothing written yet: one batch later
    rundir.flush()
    assert [json.loads(x)["query_id"] for x in lines(rundir)] == [f"q{i}" for i in range(5)]
    rundir.close()


def test_buffered_appends_reach_the_file_within_100_ms(tmp_path):
    """The flusher writes a batch when its first line is FLUSH_INTERVAL_S old on the RunDir's clock, and not
    before, however long the flusher's thread takes to look: the clock stands still until the test moves it."""
    assert FLUSH_INTERVAL_S <= 0.1
    clock = StillClock(1000.0)
    rundir = RunDir(tmp_path, clock=clock)
    rundir.append(rec(0))
    clock.set(1000.05)
    rundir.append(rec(1))  # joins the batch, which stays timed from its first line
    clock.set(1000.0 + FLUSH_INTERVAL_S - 0.001)
    clock.read_twice()
    assert lines(rundir) == []  # a millisecond early: still buffered
    clock.set(1000.0 + FLUSH_INTERVAL_S)
    wait_for_lines(rundir, 2)  # due: written without a flush() or close()
    clock.set(2000.0)
    rundir.append(rec(2))  # a later batch is timed from its own first line
    clock.set(2000.0 + FLUSH_INTERVAL_S - 0.001)
    clock.read_twice()
    assert len(lines(rundir)) == 2
    clock.set(2000.0 + FLUSH_INTERVAL_S)
    wait_for_lines(rundir, 3)
    rundir.close()
    assert [json.loads(x)["query_id"] for x in lines(rundir)] == ["q0", "q1", "q2"]


def test_the_real_clock_flushes_without_help(tmp_path):
    """With the default (monotonic) clock the flusher thread writes the batch on its own: waited for as an
    event, with no bound on how long a busy machine takes to run the thread."""
    rundir = RunDir(tmp_path)
    rundir.append(rec(0))
    wait_for_lines(rundir, 1)
    rundir.close()


def test_close_writes_everything_and_stops_the_flusher(tmp_path):
    before = len(flusher_threads())
    rundir = RunDir(tmp_path, flush_interval_s=30.0)
    for i in range(3):
        rundir.append(rec(i))
    assert len(flusher_threads()) == before + 1
    rundir.close()
    assert len(lines(rundir)) == 3
    assert len(flusher_threads()) == before  # the run owns its thread: nothing left running
    rundir.append(rec(3))  # a closed RunDir opens the file again
    rundir.close()
    assert len(lines(rundir)) == 4


def test_immediate_mode_writes_each_line_before_append_returns(tmp_path):
    rundir = RunDir(tmp_path, immediate=True, flush_interval_s=30.0)
    before = len(flusher_threads())
    for i in range(3):
        rundir.append(rec(i))
        assert len(lines(rundir)) == i + 1
    assert len(flusher_threads()) == before
    rundir.close()


def test_rewrite_and_load_see_buffered_lines(tmp_path):
    before = len(flusher_threads())
    rundir = RunDir(tmp_path, flush_interval_s=30.0)
    for i in range(4):
        rundir.append(rec(i))
    assert sorted(rundir.load_records()) == ["q0", "q1", "q2", "q3"]  # load flushes first
    rundir.append(rec(9))
    rundir.rewrite_records([rec(1), rec(0)])
    assert [json.loads(x)["query_id"] for x in lines(rundir)] == ["q1", "q0"]
    assert len(flusher_threads()) == before  # rewrite closed the buffer and its thread


def test_concurrent_appends_from_threads_all_arrive_intact(tmp_path):
    rundir = RunDir(tmp_path, flush_interval_s=0.01)

    def writer(k: int) -> None:
        for i in range(200):
            rundir.append(rec(k * 1000 + i))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rundir.close()
    got = [json.loads(x)["query_id"] for x in lines(rundir)]
    assert len(got) == 1200 and len(set(got)) == 1200


@pytest.mark.skipif(not V010_RECORDS, reason="0.1.0 fixtures not present")
def test_lines_are_byte_identical_to_0_1_0():
    for path in V010_RECORDS[:3]:
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            assert record_line(Record.from_dict(json.loads(line))) == line


SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from evalkit.core.record import Record
    from evalkit.rundir.layout import RunDir
    from evalkit.engine.stopping.shutdown import on_signals

    def rec(i):
        return Record(query_id=f"q{i}", item_id="x", base_id="x", variant={}, model="m", request_key="k",
                      response="A", gold="A")

    async def main(out, mode):
        rundir = RunDir(out, flush_interval_s=3600)  # only the exit paths can write these lines
        if mode == "exit":
            for i in range(7):
                rundir.append(rec(i))
            return  # no close(): the interpreter's exit flushes
        with on_signals(rundir.flush):
            for i in range(7):
                rundir.append(rec(i))
            print("ready", flush=True)
            await asyncio.sleep(60)

    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except KeyboardInterrupt:
        sys.exit(130)
""")


def test_interpreter_exit_flushes_buffered_lines(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), "exit"], cwd=REPO, timeout=60)
    assert out.returncode == 0
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 7


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_flushes_then_stops_like_ctrl_c(tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path), "signal"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err  # KeyboardInterrupt reached the caller: "interrupted, resume"
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 7


def test_holds_exactly_tells_when_a_resume_need_not_rewrite(tmp_path):
    rundir = RunDir(tmp_path)
    rundir.rewrite_records([rec(0), rec(1)])
    loaded = rundir.load_records()
    assert rundir.holds_exactly(loaded)
    assert not rundir.holds_exactly({"q0": loaded["q0"]})  # q1 is to be dropped (e.g. an error)
    with rundir.records_path.open("a", encoding="utf-8") as f:
        f.write(record_line(rec(1)) + '{"query_id": "q2", "torn')
    loaded = rundir.load_records()
    assert sorted(loaded) == ["q0", "q1"] and not rundir.holds_exactly(loaded)  # a duplicate and a torn line
