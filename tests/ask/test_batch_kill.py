"""`evalkit run --batch` killed (SIGKILL) while its batch is pending, or between the provider accepting
a batch and evalkit recording it: the same command completes the run, and no request is submitted twice.
Through the CLI and the real SDKs against the simulated batch APIs."""

from __future__ import annotations

import json
import signal
import time

import pytest
from cli_under_test import run_cli, start_cli
from sim_providers import base_url, key_env, plain_providers
from synthetic_data import make_mcq_jsonl

from evalkit.ask.batch.journal import JOURNAL, read_events
from evalkit.providers.registry import RECORDS
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

BATCHED = [f"{p}/sim-model" for p in plain_providers() if RECORDS[p].batch is not None]  # the registry's batch APIs
ENV = {k: v for m in BATCHED for k, v in key_env(m.partition("/")[0], "sk-test").items()}
N = 6
# run_cli's prelude, run by the child before the command: the process dies as a kill would the moment the
# provider has accepted a batch and evalkit is about to record its id, and never anywhere else. (A prelude,
# not a sitecustomize on PYTHONPATH: the child is forked warm, not started cold with the SDKs imported again.)
DIE_AFTER_SUBMIT = '''
import os

from evalkit.ask.batch.journal import BatchJournal


def _die(self, tag, batch_id):
    os._exit(137)


BatchJournal.submitted = _die
'''


def _args(model: str, sim: SimThread, tmp_path, *extra: str) -> list[str]:
    url = base_url(model.partition("/")[0], sim.url)
    return ["run", "mcq", "--model", model, "--data", str(tmp_path / "ds" / "data.jsonl"), "--base-url", url,
            "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
            "--prices", str(tmp_path / "prices.json"), *extra]


def _wait_until_polled(journal, child, timeout: float = 120) -> None:  # noqa: ANN001
    """Return once the run directory's journal records the batch's id and a state read from the provider."""
    deadline = time.monotonic() + timeout
    while not any(e["event"] == "state" for e in read_events(journal)):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, f"no batch polled after {timeout} s: {read_events(journal)}"
        time.sleep(0.02)
    assert [e["event"] for e in read_events(journal)][:2] == ["intent", "submitted"]


def _setup(model: str, tmp_path) -> SimConfig:
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=9)
    (tmp_path / "prices.json").write_text(json.dumps({model: {"input": 3.0, "output": 15.0}}))
    return SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))


@pytest.mark.slow
@pytest.mark.parametrize("model", BATCHED)
def test_a_run_killed_while_its_batch_is_pending_is_completed_by_the_same_command(model, tmp_path):
    with SimThread(_setup(model, tmp_path)) as sim:
        sim.batches.behaviour.frozen = True
        sim.batches.behaviour.fail_first = 1  # one line fails inside the batch: it is submitted again
        child = start_cli(_args(model, sim, tmp_path, "--batch"), env=ENV, cwd=tmp_path)
        _wait_until_polled(tmp_path / "run" / JOURNAL, child)  # the batch is recorded, and the run polls it
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert sim.batches.counts == {"batches": 1, "lines": N, "answered": 0, "failed": 0}
        sim.batches.behaviour.frozen = False
        done = run_cli(_args(model, sim, tmp_path, "--batch"), env=ENV, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sim.batches.counts == {"batches": 2, "lines": N + 1, "answered": N, "failed": 1}
        assert sim.counters.snapshot()["completions"] == N  # every query answered exactly once
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["metrics"]["accuracy"] == 100.0 and summary["missing"] == 0
        assert summary["usage"]["cost_usd"] == pytest.approx(summary["usage"]["cost_live_usd"] / 2)
        requests = sim.counters.snapshot()["requests"]
        again = run_cli(_args(model, sim, tmp_path), env=ENV, cwd=tmp_path)  # without --batch: all cached
        assert again.returncode == 0 and sim.counters.snapshot()["requests"] == requests
        assert sim.batches.counts["lines"] == N + 1


@pytest.mark.slow
@pytest.mark.parametrize("model", BATCHED)
def test_a_kill_between_creating_a_batch_and_recording_it_never_submits_twice(model, tmp_path):
    with SimThread(_setup(model, tmp_path)) as sim:
        sim.batches.behaviour.frozen = True
        died = run_cli(_args(model, sim, tmp_path, "--batch"), env=ENV, cwd=tmp_path, prelude=DIE_AFTER_SUBMIT)
        assert died.returncode == 137 and sim.batches.counts["batches"] == 1
        events = [json.loads(x)["event"] for x in (tmp_path / "run" / "batches.jsonl").read_text().splitlines()]
        assert events == ["intent"]  # the provider has the batch; the run directory does not know its id
        sim.batches.behaviour.frozen = False
        done = run_cli(_args(model, sim, tmp_path, "--batch"), env=ENV, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sim.batches.counts["batches"] == 1 and sim.batches.counts["lines"] == N  # found by its tag
        assert sim.counters.snapshot()["completions"] == N
