"""A disk that fills up mid-run stops the sending at the first failed write.

With the run directory and the cache on a full filesystem, 65 answers arrived after the first
failed write and 47 were paid for again on resume: the flusher kept the records in memory and
said nothing, and the runner went on asking. Now the first failed write of records.jsonl or of
the cache stops new requests (those in flight come back and are kept), the records still buffered
get one more try at the end, and the run exits 2 with one line naming the file, the system's words
and how many answers could not be written, how many of those the cache holds and how many are
lost. A resume with room asks exactly the lost ones again (and those never asked).

The full disk is simulated in-process (a tmpfs needs a mount): RunDir._write fails with ENOSPC —
after writing half of what it was given, as a real full disk does — from the K-th record on, and
that record forces a write, so the failure comes at a known point; the cache's group commit fails
with SQLite's "database or disk is full".
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.ask.store.cache import ResponseCache
from evalkit.cli import main
from evalkit.rundir.layout import RunDir
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 60
K = 12  # the record at which the disk fills
CONCURRENCY = 4
KEPT = re.compile(r"(\d+) answers received could not be written to the records: (\d+) are in the response cache "
                  r"or received.jsonl \(a resume takes them from there\), (\d+) are lost \(asked again on resume\)")


class Disk:
    """The simulated filesystem: full from the K-th record on, for `fails` failed writes (None: for good)."""

    def __init__(self, sim: SimThread, *, records: bool = True, cache: bool = False, fails: int | None = None):
        self.sim, self.records, self.cache, self.fails = sim, records, cache, fails
        self.full = False
        self.appended = 0
        self.failed = 0
        self.heard_at_failure: int | None = None  # requests the server had heard at the first failed write

    def _fail(self) -> bool:
        if not self.full or (self.fails is not None and self.failed >= self.fails):
            return False
        self.failed += 1
        if self.heard_at_failure is None:
            self.heard_at_failure = self.sim.counters.snapshot()["requests"]
        return True

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_write, real_append, real_set_many = RunDir._write, RunDir.append, ResponseCache.set_many

        def write(rundir: RunDir, lines: list[str]) -> None:
            if self.records and self._fail():
                text = "".join(lines)
                real_write(rundir, [text[: len(text) // 2]])  # a torn line on disk, as a full disk leaves it
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_write(rundir, lines)

        def append(rundir: RunDir, record) -> None:  # noqa: ANN001
            real_append(rundir, record)
            self.appended += 1
            if self.appended == K:
                self.full = True
                if self.records:
                    with contextlib.suppress(OSError):
                        rundir.flush()  # this record's write fails now, not at the next 100 ms tick

        def set_many(cache: ResponseCache, items) -> None:  # noqa: ANN001
            if self.cache and self._fail():
                raise sqlite3.OperationalError("database or disk is full")
            real_set_many(cache, items)

        monkeypatch.setattr(RunDir, "_write", write)
        monkeypatch.setattr(RunDir, "append", append)
        monkeypatch.setattr(ResponseCache, "set_many", set_many)


@pytest.fixture
def data(tmp_path):
    return make_mcq_jsonl(tmp_path / "ds", N, seed=8, image_size=48)


def _run(data, url: str, tmp_path, *extra: str) -> int:
    return main(["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--out", str(tmp_path / "run"),
                 "--base-url", url, "--no-progress", "--no-plots", "--concurrency", str(CONCURRENCY),
                 "--cache-dir", str(tmp_path / "cache"), *extra])


def _records(tmp_path) -> list[dict]:
    path = tmp_path / "run" / "records.jsonl"  # (a run that wrote nothing leaves no run directory)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]  # every line whole: a torn write was cut back


def _full_then_room(data, tmp_path, monkeypatch, capsys, *extra: str, **disk_kw) -> dict:
    """The run on the full disk, then the same command with room: what each did and said."""
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        disk = Disk(sim, **disk_kw)
        with monkeypatch.context() as m:
            disk.install(m)
            code = _run(data, sim.url, tmp_path, *extra)
        err = capsys.readouterr().err.strip()
        heard = sim.counters.snapshot()["requests"]
        written = len(_records(tmp_path))
        again = _run(data, sim.url, tmp_path, *extra)
        resumed = sim.counters.snapshot()["requests"] - heard
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert err.startswith("evalkit: error: cannot write ") and err.endswith(
        "; free some space, then re-run the same command to resume"), err
    assert disk.heard_at_failure is not None and heard <= disk.heard_at_failure + CONCURRENCY < N
    assert again == 0, capsys.readouterr().err
    records = _records(tmp_path)
    assert len(records) == N and all(r["correct"] for r in records)
    return {"err": err, "heard": heard, "written": written, "resumed": resumed}


def test_records_that_cannot_be_written_stop_the_sending(data, tmp_path, monkeypatch, capsys):
    got = _full_then_room(data, tmp_path, monkeypatch, capsys)
    assert f"cannot write {tmp_path / 'run' / 'records.jsonl'}: No space left on device; stopped sending; " in got["err"]
    unwritten, cached, lost = map(int, KEPT.search(got["err"]).groups())
    assert got["written"] < K <= got["written"] + unwritten == got["heard"]  # every answer received: written or counted
    assert (cached, lost) == (unwritten, 0)  # the cache holds them: nothing is paid for twice
    assert got["resumed"] == N - got["heard"]


def test_a_full_cache_and_records_name_the_lost_answers(data, tmp_path, monkeypatch, capsys):
    """Neither the records nor the cache can be written; received.jsonl (its own small appends) could: it
    keeps every answer received, and the resume asks none of them again."""
    got = _full_then_room(data, tmp_path, monkeypatch, capsys, cache=True)
    unwritten, kept, lost = map(int, KEPT.search(got["err"]).groups())
    assert got["written"] + unwritten == got["heard"] and kept + lost == unwritten and (kept, lost) == (unwritten, 0)
    assert got["resumed"] == N - got["heard"] + lost  # exactly the lost answers are asked again


def test_a_full_cache_alone_stops_the_sending(data, tmp_path, monkeypatch, capsys):
    got = _full_then_room(data, tmp_path, monkeypatch, capsys, records=False, cache=True)
    assert got["err"].startswith(f"evalkit: error: cannot write {tmp_path / 'cache'}/cache.db: database or disk is "
                                 "full; stopped sending; every answer received is in the records;"), got["err"]
    assert got["written"] == got["heard"] and got["resumed"] == N - got["heard"]


def test_without_the_cache_what_is_not_written_is_lost(data, tmp_path, monkeypatch, capsys):
    got = _full_then_room(data, tmp_path, monkeypatch, capsys, "--no-cache")
    unwritten, cached, lost = map(int, KEPT.search(got["err"]).groups())
    assert got["written"] == K and unwritten == lost == got["heard"] - K and cached == 0
    assert got["resumed"] == N - K


def test_room_found_at_the_end_writes_every_answer(data, tmp_path, monkeypatch, capsys):
    got = _full_then_room(data, tmp_path, monkeypatch, capsys, fails=1)
    assert "No space left on device; stopped sending; every answer received is in the records;" in got["err"]
    assert got["written"] == got["heard"] and got["resumed"] == N - got["heard"]


def test_a_failed_write_is_cut_back_and_kept_buffered(tmp_path, monkeypatch):
    """RunDir alone: the torn half-line is removed, the lines stay buffered, and give_up hands them back."""
    from evalkit.core.record import Record

    rundir = RunDir(tmp_path / "r", immediate=True)
    rundir.path.mkdir()
    recs = [Record(query_id=f"q{i}", item_id=f"i{i}", base_id=f"i{i}", variant={}, model="m", request_key=f"k{i}",
                   response="A", gold="A") for i in range(3)]
    rundir.append(recs[0])
    real_write = RunDir._write

    def full(self: RunDir, lines: list[str]) -> None:
        real_write(self, ["{\"torn"])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(RunDir, "_write", full)
    rundir.append(recs[1])  # no exception: the run is stopped by write_error instead
    rundir.append(recs[2])
    assert rundir.write_error is not None and rundir.write_error.errno == errno.ENOSPC
    assert rundir.buffered == 2 and len(_lines(rundir)) == 1
    lost = rundir.give_up()
    assert [json.loads(x)["query_id"] for x in lost] == ["q1", "q2"] and rundir.buffered == 0
    rundir.close()  # nothing left to try
    monkeypatch.setattr(RunDir, "_write", real_write)
    rundir.append(recs[2])
    assert [json.loads(x)["query_id"] for x in _lines(rundir)] == ["q0", "q2"]


def _lines(rundir: RunDir) -> list[str]:
    return rundir.records_path.read_text(encoding="utf-8").splitlines()


def test_answers_in_flight_when_the_cache_fails_are_waited_for(tmp_path, monkeypatch, capsys):
    """The drain after a fatal error counts from the error, not from the runner's last half-second tick:
    answers that take longer than that tick to come back are still waited for and recorded (before, a
    failure seen during the tick's wait ended the drain at once on a loaded machine, and the answers in
    flight were abandoned, paid for and asked again)."""
    small = make_mcq_jsonl(tmp_path / "ds", 20, seed=8, image_size=48)
    key = answer_key_for("mcq", {"data": str(small)})
    with SimThread(SimConfig(answer_key=key, latency_s=0.8)) as sim:  # every answer outlasts the 0.5 s tick
        disk = Disk(sim, records=False, cache=True)
        with monkeypatch.context() as m:
            disk.install(m)
            code = _run(small, sim.url, tmp_path)
        err = capsys.readouterr().err
        heard = sim.counters.snapshot()["requests"]
    assert code == 2 and "database or disk is full; stopped sending" in err, err
    assert K < heard < 20 and len(_records(tmp_path)) == heard  # every request heard was answered and recorded
