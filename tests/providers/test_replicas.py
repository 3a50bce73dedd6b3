"""Several vLLM replicas: least-busy routing, a replica killed mid-run, `vllm/auto`."""

from __future__ import annotations

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.providers.replicas import ReplicaPool
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_pool_routes_to_least_outstanding_and_ejects_failing():
    clock = FakeClock()
    pool = ReplicaPool(["a", "b"], failures_to_eject=2, cooldown_s=10, clock=clock)
    a, b = pool.replicas
    with pool.lease(a):
        assert pool.pick() is b  # a is busy
    pool.failed(b)
    assert pool.pick(exclude=[a]) is b  # one failure: still in
    pool.failed(b)
    assert [r.url for r in pool.healthy()] == ["a"]  # two in a row: out
    assert pool.pick() is a
    clock.t = 10.5
    assert {r.url for r in pool.healthy()} == {"a", "b"}  # back after the cool-down
    pool.failed(a, unreachable=True)
    assert pool.pick() is b


def test_replica_killed_half_way(tmp_path, fast_backoff, no_plots):
    n = 400  # 200 answered before the kill, 200 after: enough for routing, ejection and the rest
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=31, image_size=32)
    key = answer_key_for("mcq", {"data": str(data)})
    killed = SimThread(SimConfig(answer_key=key, latency_s=0.01)).start()
    records_seen = []

    def watch() -> None:
        records_seen.append(1)
        if len(records_seen) == n // 2:
            killed.close()  # the replica dies half-way through the run

    common = dict(data=str(data), cache_dir=str(tmp_path / "cache"), progress=False, concurrency=16,
                  cache_tag="qwen-replicas", timeout=5.0)
    with SimThread(SimConfig(answer_key=key, latency_s=0.01)) as survivor:
        urls = [killed.url, survivor.url]
        res = run("mcq", "vllm/sim-model", base_url=urls, out=str(tmp_path / "run"), on_record=watch, **common)
        took = survivor.counters.snapshot()
        again = run("mcq", "vllm/sim-model", base_url=[survivor.url], out=str(tmp_path / "again"), **common)
        after = survivor.counters.snapshot()
    killed.close()
    assert res.exit_code == 0 and res.summary["counts"]["correct"] == n
    assert len({r.query_id for r in res.records}) == n and all(r.error is None for r in res.records)
    assert took["completions"] >= n // 2  # the survivor took its share and then the rest
    assert set(took["per_key"].values()) == {1}
    # a re-run against only the survivor (same --cache-tag) is fully cached
    assert after["requests"] == took["requests"] and again.summary["cache"]["hits"] == n


def test_vllm_auto_reads_the_served_model(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 5, seed=2)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, served_model_name="Qwen/Qwen2.5-VL-7B", strict_model=True)) as sim:
        res = run("mcq", "vllm/auto", data=str(data), base_url=sim.url, out=str(tmp_path / "r"),
                  no_cache=True, progress=False)
    assert res.summary["model"] == "vllm/Qwen/Qwen2.5-VL-7B" and res.summary["metrics"]["accuracy"] == 100.0


def test_vllm_auto_unreachable_is_a_clear_error(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=2)
    with pytest.raises(EvalkitError, match="cannot list served models"):
        run("mcq", "vllm/auto", data=str(data), base_url="http://127.0.0.1:9", out=str(tmp_path / "r"),
            no_cache=True, progress=False)
