"""`--batch` end to end, through the real SDKs against the simulated batch APIs of all three providers:
answers, costs, the journal, failures resubmitted, and a run that comes back for batches it left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

ENV = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "GEMINI_API_KEY": "g-test"}
MODELS = ["openai/sim-model", "anthropic/sim-model", "google/sim-model"]
N = 8


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def _run(model: str, data: Path, sim: SimThread, out: Path, **kw):
    url = sim.url + "/v1" if model.startswith("openai/") else sim.url
    return run("mcq", model, data=str(data), base_url=url, env=ENV, out=str(out), progress=False,
               cache_dir=str(out.parent / "cache"), plots=False, **kw)


@pytest.fixture
def data(tmp_path):
    return make_mcq_jsonl(tmp_path / "ds", N, seed=5)


@pytest.mark.parametrize("model", MODELS)
def test_a_batch_run_scores_like_a_live_one_at_half_the_price(model, data, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({model: {"input": 2.0, "output": 8.0}}))
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = _run(model, data, sim, tmp_path / "run", batch=True, prices=str(prices))
        counters = {**sim.counters.snapshot(), "batch": dict(sim.batches.counts)}
        assert res.exit_code == 0, res.messages
        assert res.summary["metrics"]["accuracy"] == 100.0
        assert counters["completions"] == N and counters["batch"]["lines"] == N  # each query answered once
        recs = _records(tmp_path / "run")
        assert len(recs) == N and {r["via"] for r in recs} == {"batch"}
        usage = res.summary["usage"]
        assert usage["cost_usd"] == pytest.approx(usage["cost_live_usd"] / 2) and usage["cost_usd"] > 0
        batches = res.summary["batches"]
        assert batches["n_batches"] == 1 and batches["states"] == {"ended": 1} and batches["requests"] == N
        # the same command without --batch: every answer from the cache, nothing sent
        again = _run(model, data, sim, tmp_path / "run")
        assert again.exit_code == 0 and sim.counters.snapshot()["requests"] == counters["requests"]
        live = _run(model, data, sim, tmp_path / "live-dir")  # a new run directory, live: the same cache entries
        assert live.exit_code == 0 and sim.counters.snapshot()["completions"] == N


@pytest.mark.parametrize("model", MODELS)
def test_failed_lines_are_resubmitted_and_a_left_batch_is_collected_later(model, data, tmp_path):
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.batches.behaviour.fail_first = 2  # two lines fail with a server error: submitted again
        sim.batches.behaviour.frozen = True  # and the batch stays pending
        first = _run(model, data, sim, tmp_path / "run", batch=True, wait=False)
        assert first.exit_code == 1 and first.summary["missing"] == N
        assert any("re-run the same command to collect" in m for m in first.messages)
        assert sim.batches.counts["lines"] == N
        sim.batches.behaviour.frozen = False  # it ends while nobody watches
        second = _run(model, data, sim, tmp_path / "run", batch=True)
        counts = {**sim.counters.snapshot(), "batch": dict(sim.batches.counts)}
        assert second.exit_code == 0 and second.summary["metrics"]["accuracy"] == 100.0
        assert counts["batch"]["batches"] == 2 and counts["batch"]["lines"] == N + 2  # only the 2 failed again
        assert counts["completions"] == N
        journal = [json.loads(x) for x in (tmp_path / "run" / "batches.jsonl").read_text().splitlines()]
        assert [e["event"] for e in journal].count("intent") == 2


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("model", MODELS)
def test_a_batch_the_provider_no_longer_knows_is_reported_and_submitted_again(model, data, tmp_path):
    port = _free_port()
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))
    with SimThread(config, port=port) as sim:
        sim.batches.behaviour.frozen = True
        first = _run(model, data, sim, tmp_path / "run", batch=True, wait=False)
        assert first.exit_code == 1 and sim.batches.counts["lines"] == N
    with SimThread(config, port=port) as sim:  # a server that knows none of it
        res = _run(model, data, sim, tmp_path / "run", batch=True)
        assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
        assert sim.batches.counts["lines"] == N and sim.counters.snapshot()["completions"] == N
        assert any("no longer known" in m and f"its {N} requests are submitted again" in m for m in res.messages)
        assert res.summary["batches"]["states"] == {"lost": 1, "ended": 1}


@pytest.mark.parametrize("model", MODELS)
def test_evalkit_batches_lists_and_cancels(model, data, tmp_path, monkeypatch, capsys):
    from evalkit.cli import main

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.batches.behaviour.frozen = True
        assert _run(model, data, sim, tmp_path / "run", batch=True, wait=False).exit_code == 1
        capsys.readouterr()
        assert main(["batches", str(tmp_path / "run")]) == 0
        out = capsys.readouterr().out
        assert "running" in out and f"{N}" in out
        assert main(["batches", str(tmp_path / "run"), "--cancel"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "cancelled" in out
        assert all(b.cancelled for b in sim.batches.batches.values())
        sim.batches.behaviour.frozen = False
        res = _run(model, data, sim, tmp_path / "run", batch=True)  # the next run submits them again
        assert res.exit_code == 0 and sim.batches.counts["lines"] == 2 * N


def test_the_judge_goes_through_batches_too(data, tmp_path):
    from evalkit.sim.model import SimParams

    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}),
                             params=SimParams(style="ordinal"))) as sim:
        res = _run("openai/sim-model", data, sim, tmp_path / "run", batch=True, judge="openai/sim-model",
                   judge_base_url=sim.url + "/v1")
        assert res.exit_code == 0, res.messages
        recs = _records(tmp_path / "run")
        assert {r["parse_method"] for r in recs} == {"llm"} and res.summary["metrics"]["accuracy"] == 100.0
        assert sim.batches.counts["batches"] == 2 and sim.batches.counts["lines"] == 2 * N  # answers, then verdicts
        assert sim.counters.snapshot()["requests"] == 0  # not one live request (only the metadata probe)


def test_batch_fallback_live_sends_what_no_batch_answered_in_time(data, tmp_path):
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.batches.behaviour.frozen = True
        res = _run("anthropic/sim-model", data, sim, tmp_path / "run", batch=True, batch_timeout=1.0,
                   batch_fallback="live")
        assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
        assert any("--batch-fallback live: 8 queries" in m for m in res.messages)
        assert {r.get("via") for r in _records(tmp_path / "run")} == {None}  # answered live
        assert sim.counters.snapshot()["requests"] == N


def test_max_cost_holds_back_a_batch_that_could_pass_it(data, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/sim-model": {"input": 1000.0, "output": 1000.0}}))
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = _run("openai/sim-model", data, sim, tmp_path / "run", batch=True, prices=str(prices), max_cost=2.0)
        assert res.exit_code == 1
        sent = sim.batches.counts["lines"]
        assert 0 < sent < N and res.summary["missing"] == N - sent
        assert res.summary["usage"]["cost_usd"] <= 2.0
