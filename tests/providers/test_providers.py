"""Provider adapters: the wire body, pass-through fields, error classification, specs and keys."""

from __future__ import annotations

import functools
import io
import json

import pytest
from sim_providers import FINISH, REFUSAL_WORD, base_url, key_env, keyed_providers, plain_providers, wire_of
from synthetic_data import draw_image, make_mcq_jsonl
from waiting import DEADLINE_S, wait_until_idle

from evalkit.ask.confirm import AllFailAlike
from evalkit.core.errors import EvalkitError, ProviderError, classify_status
from evalkit.core.fingerprint import fingerprint_bytes
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message
from evalkit.engine.evaluate import run
from evalkit.images.pipeline import PreparedImage
from evalkit.providers import api_key_for, create_provider, parse_spec
from evalkit.providers.openai.compat import (
    OpenAICompatProvider,
    normalise_base_url,
    proxy_for,
    retry_after_from_headers,
)
from evalkit.providers.registry import RECORDS
from evalkit.sim.answerkey import AnswerEntry, AnswerKey
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread, start_sim


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


# ---- one behaviour, every provider: the real client (SDK or aiohttp) against its simulated dialect ----
# The providers are the registry's (tests/sim_providers.py): a new record on the simulator's wires runs here.

OPTIONS = "A. red\nB. green\nC. blue\nD. white"


def keys(provider: str) -> dict[str, str]:
    """A secret in the provider's key variable, where it needs one (never to be found on disk)."""
    return key_env(provider, f"{provider}-test-SECRET{sum(map(ord, provider)) % 100:02d}")


def png(seed: int, size: int = 96) -> PreparedImage:
    buf = io.BytesIO()
    draw_image(seed, size).save(buf, "PNG")
    return PreparedImage(buf.getvalue(), "image/png", size, size)


def user(n_images: int, text: str) -> Message:
    return Message.user(*[ImagePart(ImageRef.from_bytes(bytes([i]))) for i in range(n_images)], text)


@pytest.mark.parametrize("provider", plain_providers())
def test_faults_every_query_answered_exactly_once(tmp_path, provider, fast_backoff, no_plots):
    n = 150
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=6)
    faults = SimFaults(rate=0.3, kinds=("429", "500", "503", "drop"), retry_after=0.05, seed=5)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        # --timeout is the suite's deadline for an event that comes (tests/waiting.py), not a pause: a request
        # the client gives up on is legitimately sent again, and paid twice if the server still answers it. On
        # a busy machine a 10 s timeout did that (151 completions for 150 queries); no fault here needs one.
        res = run("mcq", f"{provider}/sim-model", data=str(data), base_url=base_url(provider, sim.url),
                  env=keys(provider), no_cache=True, out=str(tmp_path / "run"), concurrency=32, max_attempts=14,
                  timeout=DEADLINE_S, progress=False)
        wait_until_idle(sim)
        counters = sim.counters.snapshot()
    assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
    assert res.summary["error_kinds"] == {}
    assert counters["completions"] == n
    assert len(counters["per_key"]) == n and set(counters["per_key"].values()) == {1}
    assert all(counters["faults"].get(k, 0) > 0 for k in ("429", "500", "503", "drop")), counters["faults"]
    # every fault cost exactly one request and was retried (Anthropic's 503s go out as 529 overloaded_error)
    assert counters["requests"] == n + sum(counters["faults"].values())


@pytest.mark.parametrize("provider", plain_providers())
@pytest.mark.parametrize("fault, kind", [("400", "permanent"), ("refusal", "refused")])
def test_permanent_faults_are_not_retried(tmp_path, provider, fault, kind):
    n = 6
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=8)
    faults = SimFaults(rate=1.0, kinds=(fault,))
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        ask = functools.partial(run, "mcq", f"{provider}/sim-model", data=str(data), base_url=base_url(provider, sim.url),
                                env=keys(provider), no_cache=True, out=str(tmp_path / "run"), progress=False)
        if kind == "permanent":  # the same 400 to every request: the run stops on it (evalkit.ask.confirm)
            with pytest.raises(AllFailAlike, match="the first 3 requests all failed with the same error"):
                ask()
        else:
            res = ask()
            assert res.summary["error_kinds"] == {kind: n} and res.exit_code == 1
        counters = sim.counters.snapshot()
    recs = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    if kind == "permanent":  # the stop comes after 3; how many of the rest were already on the wire is a race
        assert 3 <= counters["requests"] <= n and counters["completions"] == 0
        assert [r["error"] for r in recs] == [kind] * counters["requests"]  # every request sent is recorded,
        assert len({r["query_id"] for r in recs}) == len(recs)  # each once: none retried
    else:
        assert counters["requests"] == n and counters["completions"] == 0  # all n were on the wire at once
        assert [r["error"] for r in recs] == [kind] * n


@pytest.mark.parametrize("provider", keyed_providers())
def test_missing_key_is_a_one_line_error_before_anything_is_written(tmp_path, provider):
    spec = parse_spec(f"{provider}/some-model")
    name, *others = RECORDS[provider].key_env
    with pytest.raises(EvalkitError, match=name) as info:
        api_key_for(spec, {"SOME_OTHER_KEY": "x"})
    assert "\n" not in str(info.value)
    assert api_key_for(spec, keys(provider)) == keys(provider)[name]
    for other in others:  # another name for the key (Gemini's GOOGLE_API_KEY) is accepted and named in the error
        assert other in str(info.value) and api_key_for(spec, {other: "g"}) == "g"
    data = make_mcq_jsonl(tmp_path / "ds", 2)
    with pytest.raises(EvalkitError, match=name) as info:
        run("mcq", f"{provider}/sim-model", data=str(data), base_url="http://127.0.0.1:9", env={},
            out=str(tmp_path / "run"), no_cache=True, progress=False)
    assert "\n" not in str(info.value) and not (tmp_path / "run" / "records.jsonl").exists()


@pytest.mark.parametrize("provider", plain_providers())
async def test_one_and_two_images_arrive_in_order(provider):
    a, b, c = png(11), png(12), png(13)
    fa, fb, fc = (fingerprint_bytes(i.data) for i in (a, b, c))
    two = f"Which picture is brighter?\n{OPTIONS}"
    # the nearest entry wins, so a swapped order lands on the [fb, fa] entry, not on [fa, fb]
    key = AnswerKey([AnswerEntry("pair", two, [fa, fb], "A"), AnswerEntry("pair", two, [fb, fa], "C"),
                     AnswerEntry("one", f"Colour?\n{OPTIONS}", [fc], "B")])
    async with await start_sim(SimConfig(answer_key=key)) as sim:
        p = create_provider(parse_spec(f"{provider}/sim-model", [base_url(provider, sim.url)]), keys(provider))
        try:
            one = await p.complete([user(1, f"Colour?\n{OPTIONS}")], GenParams(max_tokens=8), [c])
            ab = await p.complete([Message.system("Answer with a letter."), user(2, two)], GenParams(), [a, b])
            ba = await p.complete([user(2, two)], GenParams(), [b, a])
        finally:
            await p.close()
        per_key = sim.counters.snapshot()["per_key"]
    assert (one.text, ab.text, ba.text) == ("B", "A", "C")
    assert one.finish_reason == FINISH[wire_of(provider)] and one.error is None
    assert len(per_key) == 3 and set(per_key.values()) == {1}  # the server tells the three requests apart
    # 96x96 images cost 255 tokens each in the simulator; text is ~4 characters a token
    assert one.usage.input_tokens == 255 + -(-len(f"Colour?\n{OPTIONS}") // 4)
    assert ab.usage.input_tokens == 2 * 255 + -(-len(f"Answer with a letter.\n{two}") // 4)
    assert one.usage.output_tokens == 2 and one.usage.cached_input_tokens == 0


@pytest.mark.parametrize("provider", plain_providers())
async def test_refusal_is_its_own_kind_and_not_retried(provider):
    async with await start_sim(SimConfig(faults=SimFaults(rate=1.0, kinds=("refusal",)))) as sim:
        p = create_provider(parse_spec(f"{provider}/sim-model", [base_url(provider, sim.url)]), keys(provider))
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete([user(1, "Colour?")], GenParams(), [png(1)])
        finally:
            await p.close()
    assert info.value.kind == "refused" and not info.value.retryable
    assert REFUSAL_WORD[wire_of(provider)] in info.value.message  # the provider's own reason, for the record


@pytest.mark.parametrize("provider", plain_providers())
async def test_a_hung_request_is_a_retryable_timeout(provider):
    async with await start_sim(SimConfig(faults=SimFaults(rate=1.0, kinds=("hang",), hang_s=5.0))) as sim:
        p = create_provider(parse_spec(f"{provider}/sim-model", [base_url(provider, sim.url)]), keys(provider),
                            timeout_s=0.2)
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete([user(0, "Colour?")], GenParams(), [])
        finally:
            await p.close()
    assert info.value.kind == "timeout" and info.value.retryable


@pytest.mark.parametrize("provider", plain_providers())
def test_run_scores_a_perfect_model_and_the_cache_answers_again(tmp_path, provider, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 40, seed=3)
    env = keys(provider)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = run("mcq", f"{provider}/sim-model", data=str(data), base_url=base_url(provider, sim.url), env=env,
                  out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"), progress=False)
        again = run("mcq", f"{provider}/sim-model", data=str(data), base_url=base_url(provider, sim.url), env=env,
                    out=str(tmp_path / "run2"), cache_dir=str(tmp_path / "cache"), progress=False)
        requests = sim.counters.snapshot()["requests"]
    assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
    assert res.summary["counts"]["correct"] == 40 and res.summary["usage"]["input_tokens"] > 40 * 255
    assert requests == 40 and again.summary["cache"]["hits"] == 40  # evalkit's own cache: nothing re-sent
    recs = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert all(r["finish_reason"] == FINISH[wire_of(provider)] and r["usage"]["output_tokens"] > 0 for r in recs)
    for path in [*(tmp_path / "run").rglob("*"), *(tmp_path / "cache").rglob("*")]:
        if path.is_file():
            for secret in env.values():
                assert secret.encode() not in path.read_bytes(), path


def test_openai_body_headers_and_default_url():
    """openai/ differs from vLLM only where the OpenAI API does: its URL, max_completion_tokens,
    no temperature for reasoning models, and the account headers the SDK reads from the environment."""
    env = {"OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj-2"}
    params = GenParams(temperature=0.0, max_tokens=9)
    chat = create_provider(parse_spec("openai/gpt-4o", env={}), {"OPENAI_API_KEY": "sk-x", **env})
    body = json.loads(chat._encode([Message.user("hi")], params, []))
    assert body["max_completion_tokens"] == 9 and "max_tokens" not in body and body["temperature"] == 0.0
    assert chat.pool.replicas[0].url == "https://api.openai.com/v1"
    assert chat._headers["OpenAI-Organization"] == "org-1" and chat._headers["OpenAI-Project"] == "proj-2"
    for model in ("o3", "o4-mini", "gpt-5-mini"):
        reasoning = create_provider(parse_spec(f"openai/{model}", env={}), {"OPENAI_API_KEY": "sk-x"})
        body = json.loads(reasoning._encode([Message.user("hi")], params, []))
        assert "temperature" not in body and reasoning.describe_params(params)["temperature"] is None
    assert parse_spec("openai/gpt-4o", env={}).endpoint == ""  # the cache key does not see the default URL


def test_openai_takes_the_environment_proxy_and_local_servers_do_not(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert proxy_for("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert proxy_for("https://internal.example/v1") is None and proxy_for("http://127.0.0.1:8000/v1") is None
    hosted = create_provider(parse_spec("openai/gpt-4o", env={}), {"OPENAI_API_KEY": "sk-x"})
    assert hosted._proxies == {"https://api.openai.com/v1": "http://proxy.example:3128"}
    local = create_provider(parse_spec("vllm/m", ["https://gpu.example/v1"], env={}), {})
    assert local._proxies == {}  # a vLLM server is reached directly, as before
