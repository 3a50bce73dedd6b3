"""Ctrl-C or SIGTERM during a run: no new request starts, the replies already on their way are
received and recorded (0.1.0 cancelled them: the server completed them and a re-run paid again),
then the run stops with 130; a second signal stops at once."""

from __future__ import annotations

import json
import signal

import pytest
from cli_under_test import start_cli
from synthetic_data import make_mcq_jsonl
from waiting import StderrWatch, wait_until_held, wait_until_idle

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def _records(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


INTERRUPTED = "interrupted: receiving the replies already on their way"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_lets_the_replies_in_flight_arrive(tmp_path, signum):
    n, workers = 48, 8
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=11)
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        args = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--base-url", sim.url,
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--concurrency", str(workers),
                "--no-progress", "--no-group-images"]
        sim.hold(after=workers)  # the first wave is answered; the second waits at the gate
        proc = start_cli(args)
        stderr = StderrWatch(proc)
        try:
            wait_until_held(sim, proc, workers)  # the second wave is on the wire, all of it
            proc.send_signal(signum)
            stderr.until(INTERRUPTED)  # the run has taken the signal (or ended: the checks below say how)
        finally:
            sim.release()  # the replies in flight go on their way
        _, err = stderr.finish()
        wait_until_idle(sim)  # anything the client abandoned would still be completed on the server
        sent_first = sim.counters.snapshot()
        recorded = {r["query_id"] for r in _records(out / "records.jsonl") if r["error"] is None}
        again = start_cli(args)
        again.communicate(timeout=120)
        sent_total = sim.counters.snapshot()["requests"]
    assert proc.returncode == 130 and "re-run the same command to resume" in err, err
    assert INTERRUPTED in err, err
    assert sent_first["requests"] == 2 * workers  # no new request after the signal
    # every reply the server sent was received and recorded
    assert len(recorded) == sent_first["completions"] == 2 * workers
    assert again.returncode == 0 and sent_total == n  # so the re-run paid for nothing twice
