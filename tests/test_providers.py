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


def test_guided_choice_reaches_the_server(tmp_path):
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
