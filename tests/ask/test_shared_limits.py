"""Rate limits shared through Redis (issue 32, item 3): three shards against one endpoint with a hidden
req/s limit, started at the same instant, are refused about as rarely as one process would be — not
three times over — and every query is answered exactly once. The scope that shares a limit never holds
the key. The throughput figure over the whole commands is bench/teams.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from redis_server import RedisServer, redis_binary
from synthetic_data import make_mcq_jsonl

from evalkit.ask.shared.limits import PREFIX, scope_of
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread

N = 240
CONCURRENCY = 8  # one process's first wave, before any reply announces the limit, is this many
LIMIT_RPS = 80
KEY = "vllm-key-canary-45c48cce2e2d7fbdea1afc51c7c6ad26"


def test_the_scope_is_an_hmac_that_tells_keys_apart_without_holding_them():
    a = scope_of(KEY, "vllm", "http://h:8000/v1", "m")
    assert a == scope_of(KEY, "vllm", "http://h:8000/v1", "m") and len(a) == 32 and KEY not in a
    assert len({a, scope_of("other", "vllm", "http://h:8000/v1", "m"), scope_of(KEY, "vllm", "http://h:9/v1", "m"),
                scope_of(KEY, "vllm", "http://h:8000/v1", "m2"), scope_of(None, "vllm", "http://h:8000/v1", "m")}) == 5


def _three_shards(tmp_path: Path, data: Path, sim: SimThread, extra: list[str]) -> list[subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_")}
    procs = [subprocess.Popen([sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model",
                               "--base-url", sim.url + "/v1", "--data", str(data), "--shard", f"{k}/3",
                               "--no-progress", "--no-plots", "--concurrency", str(CONCURRENCY),
                               "--out", str(tmp_path / f"shard{k}"),
                               "--cache-dir", str(tmp_path / f"cache{k}"), *extra],
                              env={**env, "VLLM_API_KEY": KEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for k in (1, 2, 3)]
    outs = [p.communicate(timeout=240) for p in procs]
    return [subprocess.CompletedProcess(p.args, p.returncode, *out) for p, out in zip(procs, outs, strict=True)]


def test_three_shards_sharing_a_redis_share_the_limit(tmp_path):
    redis_binary()
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=31, image_size=32)
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), api_key=KEY, latency_s=0.05,
                       faults=SimFaults(rps=LIMIT_RPS, rate_headers="openai"))
    with RedisServer(tmp_path / "redis") as server, SimThread(config) as sim:
        done = _three_shards(tmp_path, data, sim, ["--cache-url", server.url])
        counts = sim.counters.snapshot()
        stored = [k.decode() for k in server.client().scan_iter(match=PREFIX + "*")]
    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr[-2000:] for d in done]
    assert counts["completions"] == N and set(counts["per_key"].values()) == {1}  # each query exactly once
    # about one process's first wave, not three limits' worth of refusals (3 x CONCURRENCY): on a busy machine
    # the shards start apart and a second wave may come before the first reply announces the limit
    assert counts["rate_limited"] <= 2 * CONCURRENCY, counts
    assert stored and all(KEY not in k for k in stored)
    assert all(KEY not in d.stdout + d.stderr for d in done)
