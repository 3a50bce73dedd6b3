"""No query paid twice in flight (issue 32, item 2): processes sharing a cache — a local folder or Redis —
claim a request key before sending it; the others wait for that answer. A claim of a process that died is
void at once on its machine, and lapses from another."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis_server import RedisServer, redis_binary
from synthetic_data import make_mcq_jsonl

from evalkit.ask.claims import PREFIX, LocalClaims, RedisClaims
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 24
ENV = {"OPENAI_API_KEY": "", "VLLM_API_KEY": ""}
DEADLINE_S = 120.0


def _dead_owner() -> str:
    """The token of a process of this machine that has exited."""
    import socket

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return f"{socket.gethostname()}:{done.stdout.strip()}:0123456789ab"


def test_local_claims_one_owner_at_a_time_and_a_dead_owner_s_claim_is_taken_over(tmp_path):
    a, b = LocalClaims(tmp_path, 300), LocalClaims(tmp_path, 300)
    try:
        assert a.claim("k1") and a.claim("k1") and not b.claim("k1")
        a.release("k1")
        assert b.claim("k1") and not a.claim("k1")
        b.release("k2")  # not held: nothing happens
        a._db.set("k3", _dead_owner())
        assert b.claim("k3") and not a.claim("k3")
        a._db.set("k4", "elsewhere:1:x")  # another machine's claim stands
        assert not b.claim("k4")
    finally:
        a.close()
        b.close()


def test_redis_claims_lapse_renew_and_are_taken_over_from_the_dead(tmp_path):
    redis_binary()
    with RedisServer(tmp_path / "redis") as server:
        client = server.client()
        a, b = RedisClaims(client, ttl_s=0.6), RedisClaims(client, ttl_s=0.6)
        try:
            assert a.claim("k1") and not b.claim("k1")
            seen = [client.pttl(PREFIX + "k1")]  # may read the full TTL (the same millisecond as the claim)

            def renewed() -> bool:  # the TTL went up again after it was seen lower
                now = client.pttl(PREFIX + "k1")
                seen.append(now)
                return now > min(seen[:-1])

            _until(renewed, "a renewal of the claim in flight")
            a.done("k1")  # answered: no longer renewed, it lapses
            _until(lambda: client.get(PREFIX + "k1") is None, "the answered claim to lapse")
            assert b.claim("k1")
            b.release("k1")
            assert client.get(PREFIX + "k1") is None
            client.set(PREFIX + "k2", _dead_owner())
            assert a.claim("k2") and client.get(PREFIX + "k2").decode() == a.owner
        finally:
            a.close()
            b.close()


def _cli(sim: SimThread, data: Path, out: Path, extra: list[str]) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model", "--base-url",
            sim.url + "/v1", "--data", str(data), "--no-progress", "--concurrency", "4", "--out", str(out), *extra]
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_")}
    return subprocess.Popen(args, cwd=out.parent, env={**env, **ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _two_runs_together(tmp_path: Path, cache_args_a: list[str], cache_args_b: list[str]) -> dict:
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=23)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.hold()  # every reply waits: both runs are in flight together
        a = _cli(sim, data, tmp_path / "a", cache_args_a)
        _until(lambda: sim.held >= 4, "the first run's requests in flight")
        b = _cli(sim, data, tmp_path / "b", cache_args_b)
        _until(lambda: sum(h.path == "/v1/models" for h in sim.heard) >= 2, "the second run's preflight")
        sim.release()
        outs = [p.communicate(timeout=DEADLINE_S) for p in (a, b)]
        assert a.returncode == 0 and b.returncode == 0, [o[1][-2000:] for o in outs]
        return sim.counters.snapshot()


def test_two_runs_started_together_over_one_cache_folder_send_each_query_once(tmp_path):
    shared = ["--cache-dir", str(tmp_path / "cache")]
    counts = _two_runs_together(tmp_path, shared, shared)
    assert counts["completions"] == N and counts["requests"] == N


def test_two_runs_started_together_over_one_redis_send_each_query_once(tmp_path):
    redis_binary()
    with RedisServer(tmp_path / "redis") as server:  # two machines: each its own local folder, one Redis
        counts = _two_runs_together(tmp_path, ["--cache-dir", str(tmp_path / "ca"), "--cache-url", server.url],
                                    ["--cache-dir", str(tmp_path / "cb"), "--cache-url", server.url])
    assert counts["completions"] == N and counts["requests"] == N


def _until(condition, what: str, deadline_s: float = DEADLINE_S) -> None:  # noqa: ANN001
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {deadline_s} s"
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def _folders(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
