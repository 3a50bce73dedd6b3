"""Provider adapters: the wire body, pass-through fields, error classification, specs and keys."""

from __future__ import annotations

import json

import pytest
from conftest import make_mcq_jsonl

from evalkit.core.errors import EvalkitError, classify_status
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message
from evalkit.engine.evaluate import run
from evalkit.images.pipeline import PreparedImage
from evalkit.providers import api_key_for, parse_spec
from evalkit.providers.openai_compat import OpenAICompatProvider, normalise_base_url, retry_after_from_headers
from evalkit.sim.faults import SimFaults
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


def test_body_has_images_in_order_and_extras_passed_through():
    spec = parse_spec("vllm/Qwen/Qwen2.5-VL-7B", ["http://h:1"])
    assert spec.model == "Qwen/Qwen2.5-VL-7B"
    provider = OpenAICompatProvider(spec)
    imgs = [PreparedImage(b"\xff\xd8first", "image/jpeg", 1, 1), PreparedImage(b"\x89PNGsecond", "image/png", 1, 1)]
    msg = Message.user(ImagePart(ImageRef.from_bytes(b"1")), ImagePart(ImageRef.from_bytes(b"2")), "Which?")
    params = GenParams.with_extra({"chat_template_kwargs": {"enable_thinking": False}, "guided_choice": ["A", "B"]},
                                  temperature=0.0, max_tokens=7, seed=3)
    body = json.loads(provider._encode([Message.system("be brief"), msg], params, imgs))
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    parts = body["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]
    assert parts[0]["image_url"]["url"] == imgs[0].data_uri() and parts[1]["image_url"]["url"] == imgs[1].data_uri()
    assert body["max_tokens"] == 7 and body["seed"] == 3 and body["temperature"] == 0.0
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["guided_choice"] == ["A", "B"]


def test_guided_choice_reaches_the_server(tmp_path, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 10, seed=4)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(style="verbose"))) as sim:
        res = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "r"),
                  no_cache=True, progress=False, extra='{"guided_choice": ["A", "B", "C", "D"]}')
    assert {r.response for r in res.records} <= {"A", "B", "C", "D"}  # verbose prose constrained to a letter
    assert res.summary["metrics"]["accuracy"] == 100.0
    assert res.summary["config"]["generation"]["extra"] == {"guided_choice": ["A", "B", "C", "D"]}


@pytest.mark.parametrize("status,kind", [(429, "rate_limit"), (500, "transient"), (503, "transient"),
                                         (529, "transient"), (408, "transient"), (400, "permanent"),
                                         (401, "permanent"), (404, "permanent"), (422, "permanent")])
def test_status_classification(status, kind):
    assert classify_status(status) == kind


def test_retry_after_prefers_milliseconds():
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert retry_after_from_headers({"retry-after": "3"}) == 3.0
    assert retry_after_from_headers({}) is None


def test_base_url_normalisation():
    assert normalise_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalise_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert normalise_base_url("http://h/api/v2") == "http://h/api/v2"


def test_specs_and_keys():
    assert parse_spec("vllm/m", env={}).base_urls == ("http://localhost:8000/v1",)
    assert parse_spec("vllm/m", env={"VLLM_BASE_URL": "http://x:1/v1"}).base_urls == ("http://x:1/v1",)
    with pytest.raises(EvalkitError, match="--base-url"):
        parse_spec("openai-compatible/m", env={})
    with pytest.raises(EvalkitError, match="OPENAI_API_KEY"):
        api_key_for(parse_spec("openai/gpt-4o", env={}), {})
    a = parse_spec("vllm/m", ["http://b:1", "http://a:1"])
    b = parse_spec("vllm/m", ["http://a:1", "http://b:1"])
    assert a.endpoint == b.endpoint  # replicas: the order does not matter to the cache


# ---- one scenario, every commercial provider's SDK against its simulated dialect, through evalkit.run ----

PROVIDER_ENVS = {"anthropic": {"ANTHROPIC_API_KEY": "sk-ant-test-SECRET42"},
                 "google": {"GEMINI_API_KEY": "gm-test-SECRET77"}}


@pytest.mark.parametrize("provider", sorted(PROVIDER_ENVS))
def test_faults_every_query_answered_exactly_once(tmp_path, provider, fast_backoff, no_plots):
    n = 150
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=6)
    faults = SimFaults(rate=0.3, kinds=("429", "500", "503", "drop"), retry_after=0.05, seed=5)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        res = run("mcq", f"{provider}/sim-model", data=str(data), base_url=sim.url, env=PROVIDER_ENVS[provider],
                  no_cache=True, out=str(tmp_path / "run"), concurrency=32, max_attempts=14, timeout=10,
                  progress=False)
        counters = sim.counters.snapshot()
    assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
    assert res.summary["error_kinds"] == {}
    assert counters["completions"] == n
    assert len(counters["per_key"]) == n and set(counters["per_key"].values()) == {1}
    assert all(counters["faults"].get(k, 0) > 0 for k in ("429", "500", "503", "drop")), counters["faults"]
    # every fault cost exactly one request and was retried (Anthropic's 503s go out as 529 overloaded_error)
    assert counters["requests"] == n + sum(counters["faults"].values())


@pytest.mark.parametrize("provider", sorted(PROVIDER_ENVS))
@pytest.mark.parametrize("fault, kind", [("400", "permanent"), ("refusal", "refused")])
def test_permanent_faults_are_not_retried(tmp_path, provider, fault, kind):
    n = 6
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=8)
    faults = SimFaults(rate=1.0, kinds=(fault,))
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        res = run("mcq", f"{provider}/sim-model", data=str(data), base_url=sim.url, env=PROVIDER_ENVS[provider],
                  no_cache=True, out=str(tmp_path / "run"), progress=False)
        counters = sim.counters.snapshot()
    assert counters["requests"] == n and counters["completions"] == 0
    recs = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert [r["error"] for r in recs] == [kind] * n
    assert res.summary["error_kinds"] == {kind: n} and res.exit_code == 1
