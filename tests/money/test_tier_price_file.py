"""`--prices FILE` gives a model's price per service tier (issue 45, item 1 follow-up): a priority run on a model
outside OpenAI's priority table and an openai-compatible server's flex run are priced from the file's `tiers`,
and `--max-cost` works with them; a malformed `tiers` entry is one line naming the file and the model, exit 2,
nothing sent. Driven through `evalkit.run`, the `evalkit` command and `evalkit sim`'s public names, so the file
runs unchanged on 0.3.0 (whose price files have no `tiers`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_cli
from synthetic_data import colour_questions

from evalkit import run
from evalkit.sim import SimConfig, SimThread
from evalkit.sim.from_bench import answer_key_for

N = 6
KEY = "sk-tier-prices"
STANDARD = {"input": 1.0, "output": 4.0, "cached_input": 0.5}
PRIORITY = {"input": 2.5, "output": 9.0, "cached_input": 1.25}
FLEX = {"input": 0.3, "output": 1.2}  # 0.3x standard; no cached rate: cached tokens at flex's input rate


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return colour_questions(tmp_path / "ds", N)


def _prices(tmp_path: Path, entries: dict) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def _cost(records, rates: dict) -> float:
    """What the records' answers cost at `rates` (OpenAI's usage: cached tokens inside input, reasoning in output)."""
    cached_rate = rates.get("cached_input", rates["input"])
    used = [{k: r.usage.get(k) or 0 for k in ("input_tokens", "cached_input_tokens", "output_tokens")} for r in records]
    return sum((u["input_tokens"] - u["cached_input_tokens"]) * rates["input"] + u["cached_input_tokens"] * cached_rate
               + u["output_tokens"] * rates["output"] for u in used) / 1e6


def _sent(sim: SimThread) -> int:
    return sum(h.route == "/v1/chat/completions" for h in sim.heard)


def _run(sim: SimThread, model: str, data: Path, tmp_path: Path, name: str, prices: Path, **kw):
    return run("mcq", model, data=str(data), base_url=sim.url + "/v1", env={"OPENAI_API_KEY": KEY},
               out=str(tmp_path / name), cache_dir=str(tmp_path / f"cache-{name}"), prices=str(prices),
               progress=False, plots=False, **kw)


def test_a_priority_run_on_a_model_outside_openais_table_is_priced_from_the_file(data, tmp_path):
    prices = _prices(tmp_path, {"openai/my-model": {**STANDARD, "tiers": {"priority": PRIORITY}}})
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        standard = _run(sim, "openai/my-model", data, tmp_path, "standard", prices)  # the file is read at all
        assert standard.exit_code == 0, standard.messages
        priority = _run(sim, "openai/my-model", data, tmp_path, "priority", prices, service_tier="priority",
                        max_cost=5.0)  # --max-cost reserves at the file's priority price: no "unknown tier price"
        assert _sent(sim) == 2 * N
    assert standard.summary["usage"]["cost_usd"] == pytest.approx(_cost(standard.records, STANDARD), rel=1e-9)
    assert priority.exit_code == 0, priority.messages
    assert [r.served_tier for r in priority.records] == ["priority"] * N
    usage = priority.summary["usage"]
    assert usage["cost_usd"] > 0
    assert usage["cost_usd"] == pytest.approx(_cost(priority.records, PRIORITY), rel=1e-9)
    assert usage["list_cost_usd"] == pytest.approx(usage["cost_usd"], rel=1e-9)
    assert usage["list_cost_standard_usd"] == pytest.approx(_cost(priority.records, STANDARD), rel=1e-9)
    assert priority.summary["budget"]["spent_usd"] == pytest.approx(usage["cost_usd"], rel=1e-9)
    # the run keeps the price it was asked at, tiers and all: `evalkit report` prices the records again the same
    reported = run_cli(["report", str(tmp_path / "priority")], cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    again = json.loads((tmp_path / "priority" / "summary.json").read_text(encoding="utf-8"))["usage"]
    assert again["list_cost_usd"] == pytest.approx(usage["list_cost_usd"], rel=1e-9)


def test_an_openai_compatible_servers_flex_is_priced_from_the_file(data, tmp_path):
    prices = _prices(tmp_path, {"openai-compatible/sim-model": {**STANDARD, "tiers": {"flex": FLEX}}})

    def plan(**kw):
        return run("mcq", "openai-compatible/sim-model", data=str(data), base_url="http://127.0.0.1:9/v1",
                   dry_run=True, prices=str(prices), cache_dir=str(tmp_path / "cache-dry"), progress=False,
                   plots=False, **kw).summary["dry_run"]

    standard = plan()
    assert standard["cost_high_usd"] > 0
    assert plan(service_tier="flex")["cost_high_usd"] == pytest.approx(0.3 * standard["cost_high_usd"], rel=1e-9)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        flex = _run(sim, "openai-compatible/sim-model", data, tmp_path, "flex", prices, service_tier="flex",
                    max_cost=5.0)
        assert _sent(sim) == N
    assert flex.exit_code == 0, flex.messages
    assert [r.served_tier for r in flex.records] == ["flex"] * N
    usage = flex.summary["usage"]
    assert usage["cost_usd"] > 0
    assert usage["cost_usd"] == pytest.approx(_cost(flex.records, FLEX), rel=1e-9)
    assert usage["list_cost_standard_usd"] == pytest.approx(_cost(flex.records, STANDARD), rel=1e-9)


@pytest.mark.parametrize(("tiers", "says"), [
    ({"flex": {"input": 0.05}}, "'tiers.flex.output' (USD per million tokens) is required"),
    ({"flex": {"input": 0.05, "output": -1}}, "'tiers.flex.output' must be a non-negative number, got -1"),
    ({"slow": {"input": 0.05, "output": 0.2}}, "'tiers' names the unknown tier 'slow' (use flex, priority)"),
    ({"priority": 3}, "'tiers.priority' must be an object like"),
    ({"flex": {"input": 0.05, "output": 0.2, "batch_input": 0.01}}, "'tiers.flex': unknown field(s) batch_input"),
    ([0.05, 0.2], "'tiers' must be an object like"),
])
def test_a_malformed_tiers_entry_is_one_line_naming_the_file_and_the_model(data, tmp_path, tiers, says):
    prices = _prices(tmp_path, {"openai/my-model": {**STANDARD, "tiers": tiers}})
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        done = run_cli(["run", "mcq", "--model", "openai/my-model", "--base-url", sim.url + "/v1", "--data", str(data),
                        "--prices", str(prices), "--no-progress", "--cache-dir", str(tmp_path / "cache"),
                        "--out", str(tmp_path / "run")], env={"OPENAI_API_KEY": KEY}, cwd=tmp_path)
        assert _sent(sim) == 0
    out = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(out) == 1, out
    assert f"price file {prices}, entry 'openai/my-model': " in out[0] and says in out[0], out
