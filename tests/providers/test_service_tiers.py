"""`--service-tier` end to end against the simulator (issue 45, item 1): a flex run of the same items costs
half the standard run, from the tier each reply says served it; the same command at another tier is
answered by the cache (0 requests); an Azure deployment without flex stops the run after one request (one
line, exit 2); OpenRouter's reported cost is the served tier's; a provider that sells no tier is refused
before anything is sent; a flex request waits 900 s unless --timeout is given; the dry run prices the tier
asked for. Driven through `evalkit.run`, the `evalkit` command and `evalkit sim`'s public names, so the
file runs unchanged on 0.3.0 (which has no --service-tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_cli
from synthetic_data import colour_questions

from evalkit import run
from evalkit.sim import SimConfig, SimThread
from evalkit.sim.from_bench import answer_key_for

try:  # evalkit 0.3.0's simulator sells no tiers: there the runs themselves show what 0.3.0 does
    from evalkit.sim import SimTiers
except ImportError:
    SimTiers = None

N = 8
KEY = "sk-tiers-test"
AZURE_VERSION = "2024-10-21"
CHAT_ROUTES = ("/v1/chat/completions", "/openai/deployments/{deployment}/chat/completions",
               "/openai/v1/chat/completions", "/api/v1/chat/completions")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """N four-option questions, each on its own image (written here: the file runs on 0.3.0's tests too)."""
    return colour_questions(tmp_path / "ds", N)


def _sim(data: Path, **tiers) -> SimConfig:
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))
    if SimTiers is not None and tiers:
        config.tiers = SimTiers(**tiers)
    return config


def _sent(sim: SimThread) -> int:
    return sum(h.route in CHAT_ROUTES for h in sim.heard)


def _openai(sim: SimThread, data: Path, out: Path, cache: Path, **kw):
    return run("mcq", "openai/gpt-4o", data=str(data), base_url=sim.url + "/v1", env={"OPENAI_API_KEY": KEY},
               out=str(out), cache_dir=str(cache), progress=False, plots=False, **kw)


def test_a_flex_run_costs_half_the_standard_run_of_the_same_items_from_the_tier_served(data, tmp_path):
    # a fresh server each (the same prompt-cache hits in both runs), one cache tag (one endpoint in the keys)
    with SimThread(_sim(data)) as sim:
        standard = _openai(sim, data, tmp_path / "standard", tmp_path / "cache-standard", cache_tag="sim")
    with SimThread(_sim(data)) as sim:
        flex = _openai(sim, data, tmp_path / "flex", tmp_path / "cache-flex", cache_tag="sim", service_tier="flex")
        asked = sim.counters["tiers_asked"]
    assert standard.exit_code == 0 and flex.exit_code == 0, flex.messages
    assert asked == {"flex": N}  # every request named the tier
    s, f = standard.summary["usage"], flex.summary["usage"]
    assert (f["input_tokens"], f["output_tokens"]) == (s["input_tokens"], s["output_tokens"])  # same answers
    assert s["cost_usd"] > 0 and f["cost_usd"] == pytest.approx(s["cost_usd"] / 2, rel=1e-9)
    assert f["list_cost_usd"] == pytest.approx(s["list_cost_usd"] / 2, rel=1e-9)
    assert f["list_cost_standard_usd"] == pytest.approx(s["list_cost_usd"], rel=1e-9)
    assert [r.served_tier for r in flex.records] == ["flex"] * N
    assert flex.summary["service_tier"] == {"requested": "flex", "served": {"flex": N}}
    lines = [json.loads(x) for x in (tmp_path / "flex" / "records.jsonl").read_text().splitlines()]
    assert [x["served_tier"] for x in lines] == ["flex"] * N
    plain = (tmp_path / "standard" / "records.jsonl").read_text().splitlines()
    assert all("served_tier" not in json.loads(x) for x in plain)  # no tier asked: lines as they always were
    manifest = json.loads((tmp_path / "flex" / "manifest.json").read_text())
    assert manifest["service_tier"] == {"requested": "flex", "served": {"flex": N}}
    # a delivery setting: the same run directory name (identity) and the same answers' keys
    assert json.loads((tmp_path / "flex" / "config.json").read_text())["identity"] == \
        json.loads((tmp_path / "standard" / "config.json").read_text())["identity"]
    assert [r.request_key for r in flex.records] == [r.request_key for r in standard.records]
    # `evalkit report` prices the records again: at the tier each says served it, not at standard
    reported = run_cli(["report", str(tmp_path / "flex")], cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    again = json.loads((tmp_path / "flex" / "summary.json").read_text())["usage"]
    assert again["cost_usd"] == pytest.approx(f["cost_usd"], rel=1e-9)
    assert again["list_cost_usd"] == pytest.approx(f["list_cost_usd"], rel=1e-9)


def test_the_same_command_with_another_tier_sends_nothing_and_keeps_the_tier_that_served(data, tmp_path):
    with SimThread(_sim(data)) as sim:
        flex = _openai(sim, data, tmp_path / "run", tmp_path / "cache", service_tier="flex")
        assert flex.exit_code == 0 and _sent(sim) == N
        for tier in ("standard", "priority"):  # the same run directory: its records answer
            again = _openai(sim, data, tmp_path / "run", tmp_path / "cache", service_tier=tier)
            assert again.exit_code == 0 and again.summary["this_run"]["sent"] == 0
        elsewhere = _openai(sim, data, tmp_path / "elsewhere", tmp_path / "cache")  # a new --out: the cache answers
        assert _sent(sim) == N
    assert elsewhere.exit_code == 0 and elsewhere.summary["cache"]["hits"] == N
    assert [r.served_tier for r in elsewhere.records] == ["flex"] * N  # the cache entry kept it
    assert elsewhere.summary["usage"]["list_cost_usd"] == pytest.approx(flex.summary["usage"]["list_cost_usd"])
    assert elsewhere.summary["this_run"]["cost_usd"] == 0


def test_an_azure_deployment_without_flex_is_one_line_exit_2_after_one_request(data, tmp_path):
    with SimThread(_sim(data, no_flex=("gpt4o-eu",))) as sim:
        done = run_cli(["run", "mcq", "--model", "azure/gpt4o-eu", "--base-url", sim.url, "--data", str(data),
                        "--api-version", AZURE_VERSION, "--service-tier", "flex", "--no-progress",
                        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run")],
                       env={"AZURE_OPENAI_API_KEY": KEY}, cwd=tmp_path)
        sent = _sent(sim)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out
    assert sent == 1  # the first request alone: the others waited for its answer
    lines = [line for line in out.splitlines() if "--service-tier flex" in line]
    assert len(lines) == 1 and "may not offer that tier" in lines[0] and "HTTP 400" in lines[0], out


def test_an_azure_deployment_with_flex_is_billed_half(data, tmp_path):
    with SimThread(_sim(data, no_flex=("another-deployment",))) as sim:
        flex = run("mcq", "azure/gpt-4o", data=str(data), base_url=sim.url, env={"AZURE_OPENAI_API_KEY": KEY},
                   out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"), progress=False, plots=False,
                   service_tier="flex", prices=str(_azure_prices(tmp_path)))
    assert flex.exit_code == 0 and [r.served_tier for r in flex.records] == ["flex"] * N
    usage = flex.summary["usage"]
    assert usage["cost_usd"] == pytest.approx(usage["list_cost_standard_usd"] / 2, rel=1e-9)


def _azure_prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"azure/gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}))
    return path


def test_openrouter_reports_the_cost_of_the_tier_served(data, tmp_path):
    def routed(sim: SimThread, out: str, **kw):
        return run("mcq", "openrouter/openai/gpt-4o", data=str(data), base_url=sim.url + "/api/v1",
                   env={"OPENROUTER_API_KEY": KEY}, out=str(tmp_path / out), no_cache=True, progress=False,
                   plots=False, **kw)

    with SimThread(_sim(data)) as sim:
        standard = routed(sim, "standard")
    with SimThread(_sim(data)) as sim:
        flex = routed(sim, "flex", service_tier="flex")
    assert standard.exit_code == 0 and flex.exit_code == 0, flex.messages
    assert {r.served_tier for r in flex.records} == {"flex"}
    assert flex.summary["usage"]["cost_usd"] == pytest.approx(standard.summary["usage"]["cost_usd"] / 2, rel=1e-9)


def test_a_provider_that_sells_no_tier_is_one_line_before_anything_is_sent(data, tmp_path):
    with SimThread(_sim(data)) as sim:
        done = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                        "--service-tier", "flex", "--no-progress", "--cache-dir", str(tmp_path / "cache")],
                       cwd=tmp_path)
        assert _sent(sim) == 0
    out = (done.stdout + done.stderr).strip()
    assert done.returncode == 2 and "Traceback" not in out
    assert "--service-tier flex: vllm/ sells no service tiers" in out


@pytest.mark.parametrize(("flags", "seconds"), [({"service_tier": "flex"}, 900.0), ({}, 120.0),
                                                ({"service_tier": "flex", "timeout": 30.0}, 30.0),
                                                ({"service_tier": "priority"}, 120.0)])
def test_a_flex_request_waits_15_minutes_unless_timeout_is_given(data, tmp_path, flags, seconds):
    with SimThread(_sim(data)) as sim:
        done = _openai(sim, data, tmp_path / "run", tmp_path / "cache", limit=1, **flags)
    assert done.exit_code == 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config"]["timeout_s"] == seconds


def test_the_dry_run_prices_the_tier_asked_for(data, tmp_path):
    def plan(**kw):
        return run("mcq", "openai/gpt-4o", data=str(data), dry_run=True, env={"OPENAI_API_KEY": KEY},
                   cache_dir=str(tmp_path / "cache"), progress=False, plots=False, **kw).summary["dry_run"]

    standard, flex = plan(), plan(service_tier="flex")
    assert standard["cost_high_usd"] > 0
    assert flex["cost_high_usd"] == pytest.approx(standard["cost_high_usd"] / 2, rel=1e-9)
    assert flex["cost_low_usd"] == pytest.approx(standard["cost_low_usd"] / 2, rel=1e-9)
    assert flex["service_tier"] == "flex"


def test_max_cost_reserves_at_the_price_of_the_tier_asked_for(data, tmp_path):
    one = run("mcq", "openai/gpt-4o", data=str(data), limit=1, dry_run=True, env={"OPENAI_API_KEY": KEY},
              cache_dir=str(tmp_path / "cache-dry"), progress=False, plots=False).summary["dry_run"]
    cap = 0.75 * one["cost_high_usd"]  # one standard request's reservation does not fit; a flex one does
    with SimThread(_sim(data)) as sim:
        standard = _openai(sim, data, tmp_path / "standard", tmp_path / "cache-standard", limit=1, max_cost=cap)
        assert _sent(sim) == 0 and standard.exit_code == 1
        flex = _openai(sim, data, tmp_path / "flex", tmp_path / "cache-flex", limit=1, max_cost=cap,
                       service_tier="flex")
        assert _sent(sim) == 1
    assert flex.exit_code == 0 and flex.summary["usage"]["cost_usd"] < cap


def test_max_cost_with_a_tier_whose_price_is_unknown_is_one_line(data, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/my-model": {"input": 1, "output": 4}}))
    with SimThread(_sim(data)) as sim:
        done = run_cli(["run", "mcq", "--model", "openai/my-model", "--base-url", sim.url + "/v1", "--data", str(data),
                        "--prices", str(prices), "--max-cost", "5", "--service-tier", "priority", "--no-progress",
                        "--cache-dir", str(tmp_path / "cache")], env={"OPENAI_API_KEY": KEY}, cwd=tmp_path)
        assert _sent(sim) == 0
    out = (done.stdout + done.stderr).strip()
    assert done.returncode == 2 and "Traceback" not in out
    assert "--max-cost needs a price for openai/my-model at --service-tier priority" in out
