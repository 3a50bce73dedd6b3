"""`--shared-budget NAME` (issue 32 item 4) against a real redis-server: two processes share one --max-cost and
stop together within one request's cost of it; a killed process's reservations lapse; a Redis lost mid-run
stops the run (exit 1, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis_server import RedisServer, redis_binary
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.money.costs import records_cost
from evalkit.money.pricing import Price
from evalkit.money.shared_budget import PREFIX, SharedBudget
from evalkit.rundir.records import read_records
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

ENV = {"OPENAI_API_KEY": "sk-test"}
PRICE = Price(2.0, 8.0, 0.5, "test", "today", "openai")


@pytest.fixture
def redis(tmp_path: Path):
    redis_binary()
    with RedisServer(tmp_path / "redis") as server:
        yield server


def _until(condition, what: str, deadline_s: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {deadline_s} s"
        time.sleep(0.01)


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_")}, **ENV}


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "evalkit.cli", *args], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _spent(out: Path) -> float:
    return records_cost(PRICE, read_records(out / "records.jsonl").records.values()) or 0.0


def test_a_killed_process_s_reservations_lapse_and_the_cap_holds(redis):
    dead = SharedBudget(redis.url, "lapse", 1.0, lease_s=0)  # its holds lapse at once
    assert dead.reserve(0.9) is not None
    alive = SharedBudget(redis.url, "lapse", 1.0)
    hold = alive.reserve(0.9)  # the dead process's 0.9 is no longer held
    assert hold is not None and alive.reserve(0.2) is None
    alive.settle(hold, 0.3)
    assert alive.spent == pytest.approx(0.3) and alive.reserve(0.7) is not None
    assert redis.client().get(PREFIX + "lapse:spent") == b"0.3"
    for ledger in (dead, alive):
        ledger.close()


def test_two_processes_with_one_shared_budget_stop_together_within_one_request_of_the_cap(
        tmp_path, redis, prices):
    data = make_mcq_jsonl(tmp_path / "ds", 120, seed=31)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        probe = run("mcq", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, limit=1,
                    out=str(tmp_path / "probe"), no_cache=True, progress=False, plots=False, prices=str(prices),
                    max_tokens=16)
        one = probe.summary["usage"]["cost_usd"]
        cap = 30.5 * one
        sim.hold(after=0)  # both processes hold reservations before any answer comes
        procs = [_start(["run", "mcq", "--model", "openai/sim-model", "--base-url", sim.url + "/v1", "--data",
                         str(data), "--cache-url", redis.url, "--shared-budget", "team", "--max-cost", repr(cap),
                         "--prices", str(prices), "--max-tokens", "16", "--no-progress", "--no-plots",
                         "--concurrency", "4", "--out", str(tmp_path / f"run{k}"), "--cache-dir",
                         str(tmp_path / f"cache{k}"), "--shard", f"{k}/2"], tmp_path) for k in (1, 2)]
        held = redis.client()
        _until(lambda: len({k.split(b"-")[0] for k in held.hkeys(PREFIX + "team:held")}) == 2,
               "both processes holding reservations (their requests held at the gate)")
        sim.release()
        outs = [p.communicate(timeout=120) for p in procs]
    total = sum(_spent(tmp_path / f"run{k}") for k in (1, 2))
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 1, (out + err)[-3000:]
        assert "--max-cost reached" in out + err and "in shared budget team" in out + err
        assert "Traceback" not in out + err
    # never past the cap; short of it by at most what the two processes held in flight when the last of them
    # found no room (reservations of the other's requests count until they settle): 2 x --concurrency 4
    assert cap - 8 * one <= total <= cap
    assert float(redis.client().get(PREFIX + "team:spent")) == pytest.approx(total)


def test_a_redis_lost_mid_run_stops_a_shared_budget_run_without_a_traceback(tmp_path, redis, prices):
    data = make_mcq_jsonl(tmp_path / "ds", 12, seed=32)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.hold(after=2)
        proc = _start(["run", "mcq", "--model", "openai/sim-model", "--base-url", sim.url + "/v1", "--data",
                       str(data), "--cache-url", redis.url, "--shared-budget", "gone", "--max-cost", "5",
                       "--prices", str(prices), "--no-progress", "--no-plots", "--concurrency", "2",
                       "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache")], tmp_path)
        _until(lambda: sim.held >= 1, "a request held at the gate")
        redis.kill()
        sim.release()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out + err)[-3000:]
    assert "stopped answering" in err and "Traceback" not in out + err
