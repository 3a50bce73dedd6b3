"""Latency percentiles and throughput in summary.json and the report, against a server with a fixed latency."""

from __future__ import annotations

import pytest
from conftest import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.engine.throughput import percentile
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def test_nearest_rank_percentiles():
    values = sorted([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (0.5, 1.0, 1.0)
    assert percentile([3.0], 50) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_a_fixed_latency_server_shows_as_that_latency(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 12, seed=4)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), latency_s=0.2)) as sim:
        res = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                  progress=False, no_cache=True, plots=False, concurrency=4)
        again = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                    progress=False, no_cache=True, plots=False, concurrency=4)
    t = res.summary["throughput"]
    assert t["answered"] == 12 and t["requests"] == 12 and t["retries"] == 0
    lat = t["latency_s"]
    assert 0.2 <= lat["p50"] <= lat["p95"] <= lat["max"] < 0.6
    # 4 in flight at 0.2 s each: about 20 requests/s at best; the ask phase took at least 3 rounds
    assert t["ask_s"] >= 0.6 and 5 <= t["requests_per_s"] <= 20.5
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Speed: latency p50 0.2" in report and "requests/s" in report
    assert again.summary["throughput"] == t  # nothing sent the second time: the last speed measured stays


def test_replicas_each_report_what_they_served(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 10, seed=4)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, latency_s=0.05)) as a, SimThread(SimConfig(answer_key=key,
                                                                                      latency_s=0.05)) as b:
        res = run("mcq", "vllm/sim-model", data=str(data), base_url=(a.url, b.url), out=str(tmp_path / "run"),
                  progress=False, no_cache=True, plots=False, concurrency=4)
    replicas = res.summary["throughput"]["replicas"]
    assert len(replicas) == 2 and sum(r["served"] for r in replicas.values()) == 10
    assert all(r["served"] > 0 and r["errors"] == 0 for r in replicas.values())
