"""Bedrock's service tiers through both of its routes against the simulator (issue 45, item 1): Converse
(Amazon Nova, signed by botocore over aiohttp) names the tier in the body's `serviceTier.type` and reads the
tier served from the reply's; Claude's InvokeModel (the anthropic SDK's Bedrock client) names it in the
`X-Amzn-Bedrock-Service-Tier` header and reads the reply's header. A run whose flex capacity is gone
completes with --tier-fallback standard, every answer recorded at standard (the reply says `default`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit import run
from evalkit.sim import SimConfig, SimThread, SimTiers
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.aws_shapes import AwsTestKeys

KEYS = AwsTestKeys("AKIAEVALKITTIERS0001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYTIERSKEY01", None)
ENV = {"AWS_ACCESS_KEY_ID": KEYS.access_key, "AWS_SECRET_ACCESS_KEY": KEYS.secret_key, "AWS_REGION": "us-east-1"}
NOVA = "us.amazon.nova-lite-v1:0"
CLAUDE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
N = 5


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_mcq_jsonl(tmp_path_factory.mktemp("bedrock-tiers"), N, seed=45)


def _sim(data: Path, **tiers) -> SimConfig:
    return SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), aws_keys=KEYS, tiers=SimTiers(**tiers))


def _run(sim: SimThread, data: Path, model: str, out: Path, **kw):
    return run("mcq", f"bedrock/{model}", data=str(data), base_url=sim.url, env=ENV, out=str(out),
               cache_dir=str(out.parent / "cache"), progress=False, plots=False, **kw)


@pytest.mark.parametrize("model", [NOVA, CLAUDE])
def test_each_route_sends_the_tier_and_records_the_tier_the_reply_names(model, data, tmp_path):
    with SimThread(_sim(data)) as sim:
        done = _run(sim, data, model, tmp_path / "run", service_tier="priority")
        asked = sim.counters["tiers_asked"]
    assert done.exit_code == 0, done.messages
    assert asked == {"priority": N}
    assert [r.served_tier for r in done.records] == ["priority"] * N
    assert done.summary["service_tier"] == {"requested": "priority", "served": {"priority": N}}


@pytest.mark.parametrize("model", [NOVA, CLAUDE])
def test_flex_capacity_gone_falls_back_to_standard_and_is_priced_there(model, data, tmp_path):
    with SimThread(_sim(data)) as sim:
        standard = _run(sim, data, model, tmp_path / "standard")
    with SimThread(_sim(data, flex_refused=1.0)) as sim:  # 503 ServiceUnavailableException for every flex request
        done = _run(sim, data, model, tmp_path / "run", service_tier="flex", tier_fallback="standard", tier_wait=0.0)
        asked, refused = sim.counters["tiers_asked"], sim.counters["capacity_refusals"]
    assert done.exit_code == 0, done.messages
    assert asked == {"flex": N, "default": N} and refused == N
    assert [r.served_tier for r in done.records] == ["standard"] * N
    speed = done.summary["throughput"]
    assert (speed["capacity_refused"], speed["tier_fallbacks"], speed["rate_limited"]) == (N, N, 0)
    s, d = standard.summary["usage"], done.summary["usage"]
    assert s["cost_usd"] > 0 and d["cost_usd"] == pytest.approx(s["cost_usd"], rel=1e-9)
