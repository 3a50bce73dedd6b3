"""Vertex AI's service tiers against the simulator (issue 45, item 1): Gemini on Vertex asks Flex or Priority
PayGo in the `X-Vertex-AI-LLM-Shared-Request-Type` header (google-genai's per-request http_options) and the
tier served is read from the reply's `usageMetadata.trafficType`, priced at it; a priority request served at
standard is recorded and priced at standard; Claude on Vertex sells no tier: one line, exit 2, nothing sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl
from vertex_account import fake_account

from evalkit import run
from evalkit.core.errors import EvalkitError
from evalkit.sim import SimConfig, SimThread, SimTiers
from evalkit.sim.from_bench import answer_key_for

N = 5
PROJECT, LOCATION = "sim-project", "us-central1"
GEMINI, CLAUDE = "gemini-2.5-flash", "claude-sonnet-4-5@20250929"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_mcq_jsonl(tmp_path_factory.mktemp("vertex-tiers"), N, seed=46)


class Vertex:
    def __init__(self, data: Path, root: Path, **tiers):
        self.account = fake_account()
        config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), google_accounts=(self.account.public,),
                           tiers=SimTiers(**tiers))
        self.sim = SimThread(config).start()
        (root / "keys").mkdir(exist_ok=True)
        key = self.account.key_file(root / "keys" / "sa.json", self.sim.url + "/token", PROJECT)
        self.env = {"GOOGLE_APPLICATION_CREDENTIALS": str(key), "GOOGLE_CLOUD_PROJECT": PROJECT,
                    "GOOGLE_CLOUD_LOCATION": LOCATION, "NO_PROXY": "127.0.0.1", "HOME": str(root / "home")}
        self.data = data

    def run(self, model: str, out: Path, **kw):
        return run("mcq", f"vertex/{model}", data=str(self.data), base_url=self.sim.url, env=self.env, out=str(out),
                   cache_dir=str(out.parent / "cache"), progress=False, plots=False, **kw)

    def close(self) -> None:
        self.sim.close()


def test_gemini_on_vertex_asks_the_tier_in_its_header_and_is_priced_at_the_traffic_type(data, tmp_path):
    plain = Vertex(data, tmp_path)
    try:
        standard = plain.run(GEMINI, tmp_path / "standard")
    finally:
        plain.close()
    cloud = Vertex(data, tmp_path, priority_over=1.0)
    try:
        flex = cloud.run(GEMINI, tmp_path / "flex", service_tier="flex")
        priority = cloud.run(GEMINI, tmp_path / "priority", service_tier="priority", no_cache=True)
        asked, served = cloud.sim.counters["tiers_asked"], cloud.sim.counters["tiers_served"]
    finally:
        cloud.close()
    assert flex.exit_code == 0 and priority.exit_code == 0, (flex.messages, priority.messages)
    assert asked == {"flex": N, "priority": N} and served == {"flex": N, "standard": N}
    assert [r.served_tier for r in flex.records] == ["flex"] * N
    assert [r.served_tier for r in priority.records] == ["standard"] * N  # trafficType ON_DEMAND
    s = standard.summary["usage"]["cost_usd"]
    assert s > 0 and flex.summary["usage"]["cost_usd"] == pytest.approx(s / 2, rel=1e-9)
    assert priority.summary["usage"]["cost_usd"] == pytest.approx(s, rel=1e-9)


def test_claude_on_vertex_sells_no_tier_one_line_exit_2_nothing_sent(data, tmp_path):
    cloud = Vertex(data, tmp_path)
    try:
        with pytest.raises(EvalkitError) as refused:
            cloud.run(CLAUDE, tmp_path / "run", service_tier="flex")
        sent = [h for h in cloud.sim.heard if h.path.endswith(":rawPredict")]
    finally:
        cloud.close()
    assert sent == []
    message = str(refused.value)
    assert "\n" not in message and "--service-tier flex" in message and "sells no service tier" in message, message
