"""A run killed with SIGKILL loses no answer it had received: the resumed run asks none of them again.

Each run is killed in turn: the simulator answers ANSWERED requests, then holds every later one at its gate. At
concurrency C the client has sent request ANSWERED + C only once each of those answers left its
request slot, so "C requests held" is the event at which every answer served has been read by the
client: the test kills the process at that moment (records.jsonl is written in 100 ms groups, the
cache in group commits just after). The server counts completions per request key; the resumed run
must send none of the keys answered before a kill. evalkit 0.3.0 asked again those of the last
moment (neither in records.jsonl nor in the cache yet): a few of them at most kills.

Each run is a process of its own, forked from the suite's warm parent (start_cli, tests/cli_zygote.py):
killed as any process is, without an interpreter start and 2-3 s of imports per run.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_under_test import run_cli, start_cli
from PIL import Image
from waiting import wait_until_idle

from evalkit.sim import SimConfig, SimThread
from evalkit.sim.from_bench import answer_key_for

N, ANSWERED, CONCURRENCY = 240, 50, 16
DEADLINE_S = 120.0


def _mcq(folder: Path, n: int) -> Path:
    """n four-option questions, each on its own small picture."""
    (folder / "images").mkdir(parents=True)
    rng = random.Random(7)
    lines = []
    for i in range(n):
        Image.new("RGB", (32, 32), tuple(rng.randrange(256) for _ in range(3))).save(folder / f"images/{i}.png")
        lines.append({"id": f"q{i:04d}", "image": f"images/{i}.png", "question": f"Question {i}: which colour?",
                      "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "ABCD"[i % 4],
                      "category": f"c{i % 3}"})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _kill_when_held(sim: SimThread, proc: subprocess.Popen, n: int) -> None:
    """SIGKILL the run the moment `n` of its requests wait at the gate (polled without a pause: the
    kill must come within the records' 100 ms flush window, as a real kill does)."""
    deadline = time.monotonic() + DEADLINE_S
    while sim.held < n:
        assert proc.poll() is None, f"the run ended before the kill: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{sim.held} requests held after {DEADLINE_S} s, waiting for {n}"
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


@pytest.mark.slow  # five processes started and killed per case
@pytest.mark.parametrize("cache_after_kill, kills", [("kept", 2), ("gone", 4)])  # "gone" is the case 0.3.0 fails
def test_sigkill_then_resume_asks_no_answer_received_before_the_kill(tmp_path, cache_after_kill, kills):
    """`kills` runs killed in turn, then one to the end. "gone": the cache is removed after each kill (a
    cache that had not stored them yet: another machine's, Redis), so the run directory alone keeps them."""
    data = _mcq(tmp_path / "ds", N)
    out, cache = tmp_path / "run", tmp_path / "cache"
    delivered: set[str] = set()  # keys answered before a kill
    asked_again: set[str] = set()
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), latency_s=0.0)) as sim:
        cmd = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--base-url", sim.url, "--out",
               str(out), "--concurrency", str(CONCURRENCY), "--no-progress", "--cache-dir", str(cache)]
        for _ in range(kills):
            sim.hold(after=ANSWERED)
            proc = start_cli(cmd)
            try:
                _kill_when_held(sim, proc, CONCURRENCY)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate(timeout=30)
            answered = {k for k, v in sim.counters.snapshot()["per_key"].items() if v}
            assert len(answered) == ANSWERED  # every answer served was read by the client before the kill
            asked_again |= answered & delivered
            delivered |= answered
            sim.release()
            wait_until_idle(sim)  # the held requests are answered to nobody: not counted
            sim.counters.reset()
            if cache_after_kill == "gone":
                shutil.rmtree(cache, ignore_errors=True)
        again = run_cli(cmd, timeout=300)
        assert again.returncode == 0, again.stderr
        per_key = sim.counters.snapshot()["per_key"]

    asked_again |= {k for k in delivered if per_key.get(k)}
    assert not asked_again, f"{len(asked_again)} answers received before a kill were paid for again"
    assert len(delivered) == kills * ANSWERED and sum(per_key.values()) == N - kills * ANSWERED
    records = [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["query_id"] for r in records) == [f"q{i:04d}" for i in range(N)]
    assert all(r["error"] is None for r in records)
    assert json.loads((out / "summary.json").read_text())["complete"] is True
    assert not (out / "received.jsonl").exists()  # the journal is gone once everything is recorded
