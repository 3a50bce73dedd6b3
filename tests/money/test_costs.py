"""Cost accounting, --dry-run and --max-cost, against the simulated server of each provider."""

from __future__ import annotations

import json

import pytest
from synthetic_data import draw_image, make_mcq_jsonl

from evalkit.core.types import Usage
from evalkit.engine.evaluate import run
from evalkit.money.pricing import Price, cost_usd
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

KEYS = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "GEMINI_API_KEY": "g-test"}
BASES = {"openai": "/v1", "anthropic": "", "google": ""}


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    table = {f"{p}/sim-model": {"input": 2.0, "output": 8.0, "cached_input": 0.5} for p in BASES}
    path.write_text(json.dumps(table))
    return path


def _two_image_set(folder):
    (folder / "images").mkdir(parents=True)
    lines = []
    for i in range(6):
        draw_image(900 + 2 * i).save(folder / "images" / f"{i}a.png")
        draw_image(901 + 2 * i).save(folder / "images" / f"{i}b.png")
        lines.append({"id": f"p{i}", "images": [f"images/{i}a.png", f"images/{i}b.png"],
                      "question": "Which of the two pictures is brighter?",
                      "options": {"A": "the first", "B": "the second", "C": "equal", "D": "unknown"},
                      "answer": "ABCD"[i % 4]})
    (folder / "data.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder / "data.jsonl"


@pytest.mark.parametrize("provider", list(BASES))
def test_two_image_items_usage_and_cost_in_the_summary(tmp_path, prices, provider, no_plots):
    data = _two_image_set(tmp_path / "ds")
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = run("mcq", f"{provider}/sim-model", data=str(data), base_url=sim.url + BASES[provider], env=KEYS,
                  out=str(tmp_path / "r"), no_cache=True, progress=False, prices=str(prices))
    # the answer key needs both fingerprints in order: a perfect score proves they arrived in order
    assert res.summary["metrics"]["accuracy"] == 100.0
    usage = res.summary["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    price = Price(2.0, 8.0, 0.5, "test", "today", provider)
    expected = sum(cost_usd(price, Usage.from_dict(r.usage)) for r in res.records)
    assert usage["cost_usd"] == pytest.approx(expected) and expected > 0


def test_dry_run_sends_nothing_and_counts_like_the_real_run(tmp_path, prices, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 40, seed=3)
    key = answer_key_for("mcq", {"data": str(data)})
    common = dict(data=str(data), env=KEYS, cache_dir=str(tmp_path / "cache"), progress=False, prices=str(prices))
    with SimThread(SimConfig(answer_key=key)) as sim:
        dry = run("mcq", "openai/sim-model", base_url=sim.url + "/v1", out=str(tmp_path / "r"), dry_run=True,
                  **common)
        assert sim.counters.snapshot()["requests"] == 0
        assert not (tmp_path / "r").exists()  # a dry run writes nothing
        real = run("mcq", "openai/sim-model", base_url=sim.url + "/v1", out=str(tmp_path / "r"), **common)
        again = run("mcq", "openai/sim-model", base_url=sim.url + "/v1", out=str(tmp_path / "r2"), dry_run=True,
                    **common)
    plan = dry.summary["dry_run"]
    assert plan["n_queries"] == real.summary["n_queries"] == 40 and plan["to_send"] == 40 and plan["cached"] == 0
    assert plan["cost_low_usd"] > 0 and plan["cost_high_usd"] > plan["cost_low_usd"]
    assert plan["input_tokens"] > 0
    assert again.summary["dry_run"]["cached"] == 40 and again.summary["dry_run"]["cost_high_usd"] == 0


def test_max_cost_stops_then_resumes(tmp_path, prices):
    data = make_mcq_jsonl(tmp_path / "ds", 120, seed=6)
    key = answer_key_for("mcq", {"data": str(data)})
    common = dict(data=str(data), env=KEYS, out=str(tmp_path / "r"), cache_dir=str(tmp_path / "cache"),
                  progress=False, prices=str(prices), concurrency=4)
    with SimThread(SimConfig(answer_key=key, latency_s=0.01)) as sim:
        first = run("mcq", "openai/sim-model", base_url=sim.url + "/v1", max_cost=0.01, **common)
        sent_first = sim.counters.snapshot()["completions"]
        per_query = first.summary["usage"]["cost_usd"] / len(first.records)
        second = run("mcq", "openai/sim-model", base_url=sim.url + "/v1", **common)
        sent_second = sim.counters.snapshot()["completions"] - sent_first
    assert first.exit_code == 1 and first.summary["stopped"] == "max_cost" and "--max-cost" in first.messages[0]
    spent = first.summary["usage"]["cost_usd"]
    assert spent <= 0.01 and per_query > 0  # each request's estimate is reserved before it is sent
    assert "of $0.0100 in this run directory (this invocation $" in first.messages[0]
    assert 0 < len(first.records) < 120
    assert second.exit_code == 0 and len(second.records) == 120
    assert sent_second == 120 - len(first.records)  # the resumed run sends only what is missing


def test_max_cost_needs_a_known_price(tmp_path):
    from evalkit.core.errors import EvalkitError

    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=6)
    with pytest.raises(EvalkitError, match="--max-cost needs a price"):
        run("mcq", "vllm/unknown-model", data=str(data), base_url="http://127.0.0.1:9", max_cost=1.0,
            out=str(tmp_path / "r"), progress=False)
