"""`evalkit report --judge` resolves unparsed answers afterwards; replay re-runs a past run exactly."""

from __future__ import annotations

import asyncio
import json

from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.engine.rereport import rereport
from evalkit.sim.answerkey import AnswerKey
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


def test_report_with_judge_resolves_unparsed_without_asking_the_model_again(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 40, seed=8)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=key, params=SimParams(style="ordinal"))) as sim:
        first = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(out),
                    cache_dir=str(tmp_path / "cache"), progress=False)
        assert first.summary["counts"]["unparsed"] == 40
        assert first.summary["metrics"]["accuracy"] == 0.0
        assert "--judge" in first.summary["hint"]
        before = sim.counters.snapshot()["requests"]
        summary = asyncio.run(rereport(out, judge="vllm/sim-model", judge_base_url=sim.url,
                                       cache_dir=str(tmp_path / "cache")))
        judge_requests = sim.counters.snapshot()["requests"] - before
    assert judge_requests == 40  # only the judge was asked
    assert summary["counts"]["unparsed"] == 0 and summary["metrics"]["accuracy"] == 100.0
    assert summary["parse_methods"] == {"llm": 40} and summary["hint"] is None
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert {r["parse_method"] for r in recs} == {"llm"} and all(r["correct"] for r in recs)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["metrics"] == summary["metrics"] and "llm" in (out / "report.md").read_text()


def test_replay_reproduces_a_past_run(tmp_path, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 50, seed=12)
    key = answer_key_for("mcq", {"data": str(data)})
    params = SimParams(theta=0.6, r=0.9, seed=3, style="mixed")
    with SimThread(SimConfig(answer_key=key, params=params)) as sim:
        original = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "a"),
                       no_cache=True, progress=False)
    replay_key = AnswerKey.from_records(tmp_path / "a" / "records.jsonl")
    with SimThread(SimConfig(answer_key=replay_key, params=SimParams(style="refusal"))) as sim:
        replayed = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "b"),
                       no_cache=True, progress=False)
    a = {r.query_id: r.response for r in original.records}
    b = {r.query_id: r.response for r in replayed.records}
    assert a == b
    assert replayed.summary["metrics"] == original.summary["metrics"]
    assert 30 < original.summary["metrics"]["accuracy"] < 90
