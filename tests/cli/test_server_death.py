"""A server that dies mid-run ends the run soon after, with the cause named and every answer kept;
a judge that dies mid-judging keeps every answer for later; 30% transient faults never trip the
breaker. (0.1.0 retried a dead server silently for a minute and then printed a score of 0.00.)"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from cli_under_test import start_cli
from synthetic_data import make_mcq_jsonl
from test_failure_paths import says

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

pytestmark = pytest.mark.slow

# rows of docs/failures.md (tests/cli/failure_table.py): what was tried, exit code, what the user reads
SERVER_DIES = ("the server dies mid-run (every connection refused)", 1,
               "stopped sending: … nothing succeeded for … s: connection refused (http://127.0.0.1:PORT/v1)")
JUDGE_DIES = ("the judge dies mid-judging", 1, "the judge stopped: … connection refused (http://127.0.0.1:PORT/v1); "
              "every answer is kept")
ROWS = [SERVER_DIES, JUDGE_DIES]
# The promise is "within 15 s" of the death, and that bound is the behaviour, so it is timed. Of the
# 10.5-12.7 s measured here (quiet, and beside four CPU-bound processes), 10 s is waiting that a slower
# machine does not stretch (the breaker's 8 s of quiet, then at most 2 s for requests in flight); the
# rest is work. 25 s leaves that work three times its room and still fails 0.1.0's minute of silent
# retries. The breaker's own reading ("nothing succeeded for 8 s") is checked as well.
DEATH_BOUND_S = 25.0


def _records(run: Path) -> list[dict]:
    path = run / "records.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _wait_until_held(sim: SimThread, proc, n: int) -> None:
    """Return once n requests wait at the simulator's gate (the run stays mid-way until it is opened)."""
    deadline = time.monotonic() + 120
    while sim.held < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{sim.held} requests held, waiting for {n}"
        time.sleep(0.02)


def _quiet_s(out: str) -> int:
    """How long nothing had succeeded when the breaker tripped, as its message says."""
    found = re.search(r"nothing succeeded for (\d+) s", " ".join(out.split()))
    assert found, out
    return int(found.group(1))


def _finish(proc, seconds: float) -> tuple[int, str]:
    try:
        out, err = proc.communicate(timeout=seconds)
    except Exception:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running after {seconds} s: {(out + err)[-2000:]}")
    return proc.returncode, out + err


def test_a_server_that_dies_mid_run_ends_it_within_15_s_and_a_rerun_pays_nothing_twice(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 40, seed=5)
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))
    run = tmp_path / "run"
    args = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--out", str(run), "--concurrency", "2",
            "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    sim = SimThread(config).start()
    port = int(sim.url.rsplit(":", 1)[1])
    sim.hold(after=10)  # ten answers, then the run waits for the test: it cannot finish before the death
    proc = start_cli([*args, "--base-url", sim.url], cwd=tmp_path)
    _wait_until_held(sim, proc, 2)  # both workers are waiting on a reply: the run is mid-way
    answered_by_sim = sim.counters["completions"]
    sim.close()  # every connection refused from now on (the two held requests are let go as it closes)
    died = time.monotonic()
    code, out = _finish(proc, 120)
    took = time.monotonic() - died
    assert took < DEATH_BOUND_S, out
    assert code == 1 and "Traceback" not in out, out
    assert says(SERVER_DIES[2], out), out
    assert 8 <= _quiet_s(out) < 15, out  # the breaker tripped on its quiet time, not when retries ran out
    answered = [r for r in _records(run) if not r["error"]]
    assert answered_by_sim == 10 and 10 <= len(answered) <= 12  # the ten let through, and the two held at most

    with SimThread(config, port=port) as again:  # the server is back: the same command finishes the run
        proc = start_cli([*args, "--base-url", sim.url], cwd=tmp_path)
        code, out = _finish(proc, 120)
        assert code == 0, out
        assert again.counters["completions"] == 40 - len(answered)  # nothing answered is paid for twice
    assert sum(1 for r in _records(run) if not r["error"]) == 40


def test_a_judge_that_dies_mid_judging_keeps_every_answer(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 30, seed=6)
    model = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), params=SimParams(style="ordinal"))
    run = tmp_path / "run"
    with SimThread(model) as sim:
        judge = SimThread(SimConfig()).start()
        judge.hold(after=3)  # three verdicts, then judging waits for the test
        proc = start_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                          "--judge", "vllm/sim-model", "--judge-base-url", judge.url, "--concurrency", "2",
                          "--out", str(run), "--cache-dir", str(tmp_path / "cache"), "--no-progress"], cwd=tmp_path)
        _wait_until_held(judge, proc, 2)  # both judging workers wait on a verdict: judging is mid-way
        judged_by_sim = judge.counters["completions"]
        judge.close()  # the two held requests are let go as it closes
        died = time.monotonic()
        code, out = _finish(proc, 120)
    took = time.monotonic() - died
    assert took < DEATH_BOUND_S, out
    assert code == 1 and "Traceback" not in out, out
    assert says(JUDGE_DIES[2], out) and f"evalkit report {run} --judge vllm/sim-model" in " ".join(out.split()), out
    assert 8 <= _quiet_s(out) < 15, out
    records = _records(run)
    assert len(records) == 30 and not any(r["error"] for r in records)  # every answer kept
    methods = [r["parse_method"] for r in records]
    assert judged_by_sim == 3 and 3 <= methods.count("llm") <= 5 and "unparsed" in methods
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["stopped"] == "judge" and summary["complete"] is False


def test_thirty_percent_transient_faults_never_trip_the_breaker(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 60, seed=7)
    faults = SimFaults(rate=0.3, kinds=("500", "503", "drop", "malformed"), seed=3)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        proc = start_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                          "--out", str(tmp_path / "run"), "--no-cache", "--no-progress", "--max-attempts", "20"],
                         cwd=tmp_path)
        code, out = _finish(proc, 120)
        assert code == 0 and "stopped sending" not in out, out
        assert sim.counters["completions"] == 60 and sim.counters["faults"]
    assert len(_records(tmp_path / "run")) == 60
