"""Host names are case-insensitive: `http://H1:8000/v1` and `http://h1:8000/v1` are one endpoint (issue 31 item 16c).

The endpoint in cache keys and run identities kept the host as typed, so two spellings of one server were two
runs and two caches. Now the scheme and host are folded to lower case (ASCII letters, as DNS folds them; the
path keeps its case). A URL that was already lower case keeps exactly the endpoint, the cache keys and so the
identity 0.2 computed (literals below, computed at b18ef28); for an upper-case one, the answers and run
directory 0.2 made under the host as typed are still found by the same command, with nothing sent.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from cli_under_test import run_main
from rich.console import Console
from synthetic_data import make_mcq_jsonl

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Runner
from evalkit.ask.store.cache import NullCache
from evalkit.core.types import GenParams, Message, Query, TextPart
from evalkit.engine.evaluate import run
from evalkit.engine.resume import OLDER_REQUESTS, KeyOnlyProvider
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers import ProviderSpec, parse_spec
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

QUERY = Query(id="q", item_id="q", base_id="q", variant={}, messages=(Message("user", (TextPart("What is 2+2?"),)),),
              gold="4", params=GenParams(temperature=0.0, max_tokens=8, seed=1))

# (spec, URL as typed, endpoint, Runner.keys_of(QUERY)), each computed by evalkit at b18ef28 (0.2)
PINNED = [
    ("vllm/m", "http://gpu1:8000", "http://gpu1:8000/v1",
     ["b3f1f3c2104c67c1c70c163479640162e6506f6c498947878fc1d93bc14328ec",
      "27e0936c85dae43c7aae3d78867ebe232f8d6a6c748a4f5efe9b62b3deab43f8"]),
    ("vllm/m", "http://gpu1:8000/v1/", "http://gpu1:8000/v1",
     ["b3f1f3c2104c67c1c70c163479640162e6506f6c498947878fc1d93bc14328ec",
      "35470994f8f721a1777dbe679052f2261aec331f21d4caa66683e5f9dada0deb"]),
    ("vllm/m", "https://gpu1.example.org/v1", "https://gpu1.example.org/v1",
     ["03943bc0bf4f95e4ac28bf2887a461e1f1303dd070fd214b7c4b9ec1a8c21313"]),
    ("vllm/m", "http://[::1]:8000/v1", "http://[::1]:8000/v1",
     ["16b6c41feef227b3c209626fd2e177ac8bdca5ece9e4ed081534a7b649643b96"]),
    ("vllm/m", "http://10.0.0.7:8000/V1", "http://10.0.0.7:8000/V1",  # the path keeps its case
     ["6973909b003fb82b1d662e574aac9549fc9f14f0f4eeaebbb3d4c517b140dc0a"]),
    ("openai-compatible/m", "http://u:p@llm.internal:9000/api/v1", "http://llm.internal:9000/api/v1",
     ["f1164cf2d53bb6549efb3dd3b769d6620028ed5e4af482f49a2b99d63463177f",
      "a791941fef30ea5edbd8efa8af75f29cbcde707245ae1cad812f387cdc294ce7"]),
    ("openai/gpt-4o", "https://proxy.example/v1", "https://proxy.example/v1",
     ["a4cbe1ae5e0eccb35772b57ab5a414cfa2bc4363af19af3d6287e499f9f8800e"]),
    ("anthropic/claude-x", "https://proxy.example/", "https://proxy.example",
     ["54299f1dd386fa2e686c9417d3df37acf6b0530c9e1444d99bc9fdec27681f8b",
      "e4ef790c5571c9ed88ab2697110a77bf7070b3622a269cc2559986f60e4838fe"]),
    ("google/gemini-x", "https://gemini-proxy.example", "https://gemini-proxy.example",
     ["0059c59db240bc50e68ae8ee56c9cedfc4ab88da4005f7119697b5d8d8471910"]),
]
# `vllm/m` at http://GPU1:8000: the keys 0.2 looked it up under (its spelling, then 0.1.0's), at b18ef28
UPPER_02_KEYS = ["73912de8a95d287ed1f8436dc8902310d7da7b91c5fb3e021734bf2c50c1084c",
                 "587af7c29ef98eeceb88bb335df0c8077bc19872ab559017acfe9b1889f4bda1"]


def _keys(spec: ProviderSpec) -> list[str]:
    with contextlib.closing(ImagePipeline()) as pipeline:
        runner = Runner(KeyOnlyProvider(spec), limiter=Limiter(concurrency=1), cache=NullCache(), pipeline=pipeline)
        return list(runner.keys_of(QUERY))


@pytest.mark.parametrize(("model", "url", "endpoint", "keys"), PINNED, ids=[f"{m} {u}" for m, u, _, _ in PINNED])
def test_a_lower_case_url_keeps_the_endpoint_and_keys_0_2_computed(model, url, endpoint, keys):
    spec = parse_spec(model, (url,), {})
    assert spec.endpoint == endpoint and _keys(spec) == keys


def test_one_server_is_one_endpoint_whatever_the_case_of_its_host():
    one = parse_spec("vllm/m", ("http://gpu1:8000/v1",), {}).endpoint
    for url in ("http://GPU1:8000/v1", "HTTP://Gpu1:8000", "http://user:PW@GPU1:8000/v1/"):
        assert parse_spec("vllm/m", (url,), {}).endpoint == one == "http://gpu1:8000/v1"
    assert parse_spec("vllm/m", ("http://A:1", "http://a:1/v1"), {}).endpoint == "http://a:1/v1"  # one replica
    assert parse_spec("vllm/m", ("http://h:1/V1",), {}).endpoint == "http://h:1/V1"  # the path is not folded
    assert parse_spec("vllm/m", ("http://[::ABCD]:1/v1",), {}).endpoint == "http://[::abcd]:1/v1"
    assert parse_spec("azure/d", ("https://MyRes.OpenAI.Azure.com/openai",), {}).endpoint == \
        "https://myres.openai.azure.com"
    upper = parse_spec("vllm/m", ("http://GPU1:8000",), {})
    keys = _keys(upper)  # today's key is the lower-case URL's, then the two 0.2 looked it up under
    assert keys == [PINNED[0][3][0], *UPPER_02_KEYS]
    assert upper.earlier_endpoints == ("http://GPU1:8000/v1", "http://GPU1:8000")


@pytest.fixture
def data(tmp_path):
    return make_mcq_jsonl(tmp_path / "ds", 6, seed=7)


def test_two_cases_of_one_host_are_one_run_and_one_cache(data, tmp_path):
    args = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--no-progress",
            "--cache-dir", str(tmp_path / "cache")]
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        upper = sim.url.replace("127.0.0.1", "LocalHost").replace("http://", "HTTP://")
        first = run_main([*args, "--base-url", upper], cwd=tmp_path)
        sent = sim.counters.snapshot()["requests"]
        second = run_main([*args, "--base-url", sim.url.replace("127.0.0.1", "localhost") + "/v1"], cwd=tmp_path)
        again = sim.counters.snapshot()["requests"]
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert sent == 6 and again == 6  # the second spelling found every answer
    [run_dir] = list((tmp_path / "runs").iterdir())  # and the same run directory
    endpoint = json.loads((run_dir / "config.json").read_text())["identity"]["endpoint"]
    assert endpoint == sim.url.replace("127.0.0.1", "localhost") + "/v1"


@pytest.mark.parametrize("named", [False, True], ids=["default-dir", "out"])
def test_a_run_0_2_made_with_an_upper_case_host_goes_on_for_free(data, tmp_path, monkeypatch, named):
    """0.2's state is made by this code with the case folding undone (the one thing that changed)."""
    monkeypatch.chdir(tmp_path)
    quiet = Console(file=open(tmp_path / "console.txt", "w"))  # noqa: SIM115 - closed with the test's tmp_path

    def evaluate(url: str):
        return run("mcq", "vllm/sim-model", data=str(data), base_url=url, cache_dir=str(tmp_path / "cache"),
                   progress=False, plots=False, env={}, console=quiet,
                   **({"out": str(tmp_path / "named")} if named else {}))

    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        url = sim.url.replace("127.0.0.1", "LOCALHOST")
        with monkeypatch.context() as as_0_2:
            as_0_2.setattr("evalkit.providers.base._lower_host", lambda u: u)
            before = evaluate(url)
        sent = sim.counters.snapshot()["requests"]
        after = evaluate(url)
        again = sim.counters.snapshot()["requests"]
    assert before.exit_code == 0 and after.exit_code == 0, after.messages
    assert sent == 6 and again == 6  # nothing asked again
    assert after.summary["metrics"]["accuracy"] == 100.0 and len(after.records) == 6
    assert after.out_dir == before.out_dir
    if not named:
        assert [p.name for p in (tmp_path / "runs").iterdir()] == [before.out_dir.name]
    identity = json.loads((after.out_dir / "config.json").read_text())["identity"]
    assert identity["endpoint"] == url + "/v1"  # the run keeps the identity it was started with
    report = run_main(["report", str(after.out_dir)], cwd=tmp_path)  # its keys, checked without a server
    assert report.returncode == 0, report.stderr
    summary = json.loads((after.out_dir / "summary.json").read_text())
    assert summary["metrics"]["accuracy"] == 100.0 and summary.get("requests") != OLDER_REQUESTS  # all current
