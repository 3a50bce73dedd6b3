"""One server is one endpoint however its URL is spelled, URL credentials never reach the run
directory, and answers cached by 0.1.0 under the URL as it was typed are still found."""

from __future__ import annotations

import asyncio
import json

from cli_under_test import run_main
from echo_provider import Echo, echo_queries
from synthetic_data import make_mcq_jsonl

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy
from evalkit.ask.runner import Runner
from evalkit.ask.store.cache import ResponseCache
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers import parse_spec
from evalkit.providers.base import ProviderSpec, canonical_url, public_url
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def test_canonical_and_public_urls():
    assert canonical_url("vllm", "http://h:8000") == canonical_url("vllm", "http://h:8000/v1/") == "http://h:8000/v1"
    assert canonical_url("vllm", "http://u:p@h:8000/v1") == "http://h:8000/v1"
    assert canonical_url("anthropic", "https://proxy.example/") == "https://proxy.example"  # its SDK adds /v1
    assert public_url("https://user:pa@ss@h/x") == "https://h/x" and public_url("h:8000") == "h:8000"
    spec = parse_spec("vllm/m", ("http://a:1", "http://b:2/v1"))
    assert spec.endpoint == "http://a:1/v1,http://b:2/v1" and spec.legacy_endpoint == "http://a:1,http://b:2/v1"
    assert parse_spec("vllm/m", ("http://a:1/v1",)).legacy_endpoint == parse_spec("vllm/m", ("http://a:1/v1",)).endpoint


def test_two_spellings_of_one_server_are_one_run_and_one_cache(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 6, seed=3)
    args = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--no-progress",
            "--cache-dir", str(tmp_path / "cache")]
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        first = run_main([*args, "--base-url", sim.url], cwd=tmp_path)
        sent = sim.counters.snapshot()["requests"]
        second = run_main([*args, "--base-url", sim.url + "/v1/"], cwd=tmp_path)
        again = sim.counters.snapshot()["requests"]
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert sent == 6 and again == 6  # the second spelling found every answer
    assert len(list((tmp_path / "runs").iterdir())) == 1  # and the same run directory


def test_credentials_in_a_base_url_never_reach_the_run_directory(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=5)
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        url = sim.url.replace("http://", "http://alice:s3cr3t-pass@")
        done = run_main(["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--out", str(out),
                        "--base-url", url, "--no-progress", "--cache-dir", str(tmp_path / "cache")])
    assert done.returncode == 0, done.stderr
    written = {p.name: p.read_text(errors="replace") for p in out.rglob("*") if p.is_file() and p.suffix != ".png"}
    assert {"config.json", "summary.json", "report.md", "records.jsonl"} <= set(written)
    assert [name for name, text in written.items() if "s3cr3t" in text or "alice" in text] == []
    assert "s3cr3t" not in done.stdout + done.stderr
    assert json.loads(written["config.json"])["identity"]["endpoint"] == sim.url + "/v1"


def test_an_answer_cached_under_the_url_as_typed_in_0_1_0_is_found(tmp_path):
    """0.1.0 keyed answers by the URLs as typed (`http://h:8000`); today's key spells it `…/v1`."""
    spec = ProviderSpec("vllm", "m", ("http://127.0.0.1:9",))
    queries = echo_queries(5)
    provider, pipeline, cache = Echo(), ImagePipeline(), ResponseCache(tmp_path / "cache")
    provider.spec = spec
    runner = Runner(provider, limiter=Limiter(concurrency=2), cache=cache, pipeline=pipeline, policy=RetryPolicy())
    try:
        old_keys = [runner.lookup.key(runner.lookup.fit(q), spec.legacy_endpoint) for q in queries]  # 0.1.0 stored them so
        assert old_keys[0] != runner.key_of(queries[0])
        for k in old_keys[:4]:
            cache.set(k, {"text": "B", "usage": {}, "finish_reason": "stop"})
        outcomes: list = []
        asyncio.run(runner.run(queries, outcomes.append, workers=2))
        single = asyncio.run(runner.ask(queries[1]))
    finally:
        cache.close()
        pipeline.close()
    by_id = {o.query.id: o for o in outcomes}
    assert provider.sent == 1 and [by_id[f"q{i}"].response.text for i in range(5)] == ["B", "B", "B", "B", "A"]
    assert [by_id[f"q{i}"].request_key for i in range(4)] == old_keys[:4]  # records name the key that answered
    assert single.cached and single.request_key == old_keys[1]
    assert runner.keys_of(queries[0]) == (runner.key_of(queries[0]), old_keys[0])
