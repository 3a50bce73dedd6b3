"""A tier's capacity refusal is its own outcome (issue 45, item 1), end to end through the real clients
against the simulator: flex requests refused for capacity ("429 Resource Unavailable") are retried with their
own back-off and counted apart, never as the account's 429s, so the learned rate stays as it was; with
`--tier-fallback standard` a run whose flex capacity is gone completes, every answer recorded and priced at
standard; without it the refused queries are failures a re-run asks again; a Gemini priority request over the
limit is recorded, and priced, at standard (the `x-gemini-service-tier` header). Driven through `evalkit.run`
and `evalkit.sim`'s public names; waits are made tiny with `tier_wait` (the back-off scales with it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import colour_questions

from evalkit import run
from evalkit.sim import SimConfig, SimFaults, SimThread
from evalkit.sim.from_bench import answer_key_for

try:  # evalkit 0.3.0 has no --service-tier and its simulator sells no tiers: see _tier and _sim
    from evalkit.sim import SimTiers
except ImportError:
    SimTiers = None

N = 8
KEY = "sk-capacity-test"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """N four-option questions, each on its own image."""
    return colour_questions(tmp_path / "ds", N)


def _sim(data: Path, **tiers) -> SimConfig:
    """A simulator selling tiers. Where none are sold (0.3.0), a flex refusal is what 0.3.0 meets today: a 429
    from the server, injected at the same share."""
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))
    if SimTiers is not None and tiers:
        config.tiers = SimTiers(**tiers)
    elif tiers.get("flex_refused"):
        config.faults = SimFaults(rate=tiers["flex_refused"], kinds=("429",), retry_after=0.01)
    return config


def _tier(name: str, **settings) -> dict:
    """The run's settings asking tier `name`; where evalkit has no --service-tier (0.3.0), the one way it has to
    send a tier, `--extra service_tier=NAME` (issue 45: "Today --extra service_tier=flex would send it")."""
    if SimTiers is None:
        return {"extra": {"service_tier": name}, "max_attempts": 12}
    return {"service_tier": name, **settings}


def _counted(sim: SimThread, name: str):
    """One of the simulator's counters (None where it keeps no such count)."""
    return sim.counters.snapshot().get(name)


def _served(records) -> list:
    return [getattr(r, "served_tier", None) for r in records]


def _openai(sim: SimThread, data: Path, out: Path, cache: Path, **kw):
    return run("mcq", "openai/gpt-4o", data=str(data), base_url=sim.url + "/v1", env={"OPENAI_API_KEY": KEY},
               out=str(out), cache_dir=str(cache), progress=False, plots=False, cache_tag="sim", **kw)


def _gemini(sim: SimThread, data: Path, out: Path, cache: Path, **kw):
    return run("mcq", "google/gemini-2.0-flash", data=str(data), base_url=sim.url, env={"GEMINI_API_KEY": KEY},
               out=str(out), cache_dir=str(cache), progress=False, plots=False, cache_tag="sim", **kw)


def test_flex_refusals_are_retried_apart_and_leave_the_learned_rate_unchanged(data, tmp_path):
    with SimThread(_sim(data, flex_refused=0.5)) as sim:  # every second flex request: 429 Resource Unavailable
        done = _openai(sim, data, tmp_path / "run", tmp_path / "cache", **_tier("flex", tier_wait=2.0))
        refused, asked = _counted(sim, "capacity_refusals"), _counted(sim, "tiers_asked")
    assert done.exit_code == 0, done.messages
    assert [r.error for r in done.records] == [None] * N  # all answered, after their own waits
    speed = done.summary["throughput"]
    assert speed["rate_limited"] == 0, speed  # not the account's 429s
    assert "limits" not in speed  # the adaptive limiter learned nothing from them: no rate was cut
    assert speed["capacity_refused"] == N - 1 and speed["tier_fallbacks"] == 0
    assert _served(done.records) == ["flex"] * N
    # requests alternate refused / served and the last one is served: 2N - 1 flex requests, N - 1 refused
    assert asked == {"flex": 2 * N - 1} and refused == N - 1
    assert speed["requests"] == 2 * N - 1 and speed["retries"] == N - 1


def test_tier_fallback_completes_a_run_whose_flex_capacity_is_gone_at_standard_price(data, tmp_path):
    with SimThread(_sim(data)) as sim:  # the same items at standard: the price to compare with
        standard = _openai(sim, data, tmp_path / "standard", tmp_path / "cache-standard")
    with SimThread(_sim(data, flex_refused=1.0)) as sim:  # flex capacity is gone: every flex request refused
        stuck = _openai(sim, data, tmp_path / "run", tmp_path / "cache", **_tier("flex", tier_wait=0.05))
        assert stuck.exit_code == 1  # incomplete, resumable: nothing was answered
        assert [r.error for r in stuck.records] == ["capacity"] * N
        assert stuck.summary["throughput"]["capacity_refused"] >= N
        sim.counters.reset()
        done = _openai(sim, data, tmp_path / "run", tmp_path / "cache",
                       **_tier("flex", tier_wait=0.0, tier_fallback="standard"))
        refused, asked = _counted(sim, "capacity_refusals"), _counted(sim, "tiers_asked")
    assert done.exit_code == 0, done.messages
    assert [r.error for r in done.records] == [None] * N
    assert asked == {"flex": N, "default": N} and refused == N  # one flex try each, then at standard
    assert _served(done.records) == ["standard"] * N
    assert done.summary["service_tier"] == {"requested": "flex", "served": {"standard": N}}
    speed = done.summary["throughput"]
    assert (speed["capacity_refused"], speed["tier_fallbacks"], speed["rate_limited"]) == (N, N, 0)
    s, d = standard.summary["usage"], done.summary["usage"]
    assert s["cost_usd"] > 0 and d["cost_usd"] == pytest.approx(s["cost_usd"], rel=1e-9)  # standard's, not half
    lines = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert sorted(x["served_tier"] for x in lines if x.get("error") is None) == ["standard"] * N
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert f"(429: 0; the tier's capacity refusals: {N}, sent at standard after them: {N})" in report


def test_a_gemini_priority_request_over_the_limit_is_recorded_and_priced_at_standard(data, tmp_path):
    with SimThread(_sim(data)) as sim:
        standard = _gemini(sim, data, tmp_path / "standard", tmp_path / "cache-standard")
    with SimThread(_sim(data, priority_over=1.0)) as sim:  # every priority request over the limit
        done = _gemini(sim, data, tmp_path / "run", tmp_path / "cache", **_tier("priority"))
        asked, served = _counted(sim, "tiers_asked"), _counted(sim, "tiers_served")
    assert done.exit_code == 0, done.messages
    assert _served(done.records) == ["standard"] * N  # the header said standard
    assert asked == {"priority": N} and served == {"standard": N}
    assert done.summary["service_tier"] == {"requested": "priority", "served": {"standard": N}}
    s, d = standard.summary["usage"], done.summary["usage"]
    assert s["cost_usd"] > 0 and d["cost_usd"] == pytest.approx(s["cost_usd"], rel=1e-9)


def test_a_gemini_flex_request_is_sent_in_the_body_and_shed_ones_are_capacity_refusals(data, tmp_path):
    with SimThread(_sim(data, flex_refused=0.5)) as sim:  # Gemini sheds with 503 UNAVAILABLE
        done = _gemini(sim, data, tmp_path / "run", tmp_path / "cache", **_tier("flex", tier_wait=2.0))
        asked, refused = _counted(sim, "tiers_asked"), _counted(sim, "capacity_refusals")
    assert done.exit_code == 0, done.messages
    speed = done.summary["throughput"]
    assert speed["rate_limited"] == 0 and "limits" not in speed, speed  # not the account's 429s
    assert speed["capacity_refused"] == N - 1
    assert asked == {"flex": 2 * N - 1} and refused == N - 1
    assert _served(done.records) == ["flex"] * N
    s = done.summary["usage"]
    assert s["cost_usd"] > 0
