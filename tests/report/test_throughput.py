"""Latency percentiles and throughput in summary.json and the report, against a server with a fixed latency."""

from __future__ import annotations

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.report.markdown import throughput_line
from evalkit.rundir.throughput import percentile
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
                  progress=False, no_cache=True, plots=False, concurrency=2)
        again = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                    progress=False, no_cache=True, plots=False, concurrency=2)
    t = res.summary["throughput"]
    assert t["answered"] == 12 and t["requests"] == 12 and t["retries"] == 0
    lat = t["latency_s"]
    assert 0.2 <= lat["p50"] <= lat["p95"] <= lat["max"]  # the server sleeps 0.2 s: a busy machine only adds
    # 12 queries 2 at a time: 6 rounds, so the ask phase is 6 answers long; the latest queries wait 5 of them for
    # a slot. Latency is the answer's own, without that wait, which would make the largest near the whole
    # phase. Both are measured in this run, so a slow machine stretches them alike (no bound on wall time).
    assert lat["max"] < t["ask_s"] / 2, (lat, t["ask_s"])
    # at least 6 rounds of 0.2 s, so at most 10 requests/s; the rate is the requests over that phase
    assert t["ask_s"] >= 1.2 and t["requests_per_s"] == pytest.approx(12 / t["ask_s"], rel=0.01)
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"Speed: {throughput_line(t)}" in report and f"latency p50 {lat['p50']:.3g} s" in report
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
