"""A full disk, a read-only run directory, or a file where --out should be: a one-line error with the
remedy and exit 2 (a re-run fails again until the user acts), never a traceback; nothing received is
lost, and once the disk has room the same command finishes without paying twice."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_under_test import run_cli
from synthetic_data import make_mcq_jsonl

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def _args(tmp_path, data, url, out=None):
    return ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--out", str(out or tmp_path / "run"),
            "--base-url", url, "--no-progress", "--cache-dir", str(tmp_path / "cache")]


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2 and "Traceback" not in err and "\n" not in err, err
    return err


def test_a_disk_that_fills_up_mid_run(tmp_path):
    n = 300
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=5)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        full = run_cli(_args(tmp_path, data, sim.url), max_file_bytes=300_000)
        sent_full = sim.counters.snapshot()["requests"]
        room = run_cli(_args(tmp_path, data, sim.url))
        sent = sim.counters.snapshot()["requests"]
    err = _one_line_error(full)
    assert "free some space" in err and "re-run the same command" in err
    assert 0 < sent_full < n  # it stopped part way
    assert room.returncode == 0, room.stderr
    assert sent == n  # what was answered before the disk filled was not paid for again
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == n and sum(bool(r["correct"]) for r in records) == n


def test_out_pointing_at_a_file(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 3, seed=2)
    (tmp_path / "run").write_text("my notes\n")
    with SimThread(SimConfig()) as sim:
        done = run_cli(_args(tmp_path, data, sim.url))
        sent = sim.counters.snapshot()["requests"]
    err = _one_line_error(done)
    assert str(tmp_path / "run") in err and sent == 0
    assert (tmp_path / "run").read_text() == "my notes\n"


def _read_only_mount(where) -> None:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("a read-only folder needs a tmpfs mount here (root ignores permissions); mount is not allowed")


def test_a_read_only_run_directory(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=6)
    mount = tmp_path / "ro"
    _read_only_mount(mount)
    try:
        with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
            args = _args(tmp_path, data, sim.url, out=mount / "run")
            first = run_cli(args)
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
            again = run_cli(args)
            sent = sim.counters.snapshot()["requests"]
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    assert first.returncode == 0, first.stderr
    err = _one_line_error(again)
    assert "Read-only file system" in err and str(mount / "run") in err and sent == 4
