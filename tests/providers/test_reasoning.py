"""`--reasoning-effort` / `--thinking-budget`: one switch, each provider's own field, seen in the request
bodies the simulated server receives through the real transports (aiohttp for openai/ and vllm/, the
official SDKs for anthropic/ and google/); clear errors where a provider has no such concept; and
without the flags, the same bodies and identities as before."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import fields, replace
from typing import Any

import pytest
from synthetic_data import draw_image, make_mcq_jsonl

import evalkit
from evalkit.cli import main as cli_main
from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.settings import RunConfig, build, non_default
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, Query
from evalkit.images.pipeline import PreparedImage
from evalkit.providers import parse_spec
from evalkit.providers.anthropic.client import AnthropicProvider
from evalkit.providers.google.client import GoogleProvider
from evalkit.providers.openai.api import openai_provider
from evalkit.providers.openai.compat import OpenAICompatProvider
from evalkit.providers.reasoning import EFFORT_BUDGETS, EFFORTS, openai_effort
from evalkit.sim.server import SimThread

PLAIN = GenParams(max_tokens=64)


def png(seed: int = 1, size: int = 64) -> PreparedImage:
    buf = io.BytesIO()
    draw_image(seed, size).save(buf, "PNG")
    return PreparedImage(buf.getvalue(), "image/png", size, size)


MESSAGES = [Message.user(ImagePart(ImageRef.from_bytes(b"\x01")), "Which colour?\nA. red\nB. green")]


@pytest.fixture(scope="module")
def sim():
    with SimThread() as s:
        yield s




def ask(provider: Any, params: GenParams) -> None:
    async def go() -> None:
        try:
            await provider.complete(MESSAGES, params, [png()])
        finally:
            await provider.close()

    asyncio.run(go())


def make(kind: str, url: str, model: str) -> Any:
    spec = parse_spec(f"{kind}/{model}", [url])
    if kind == "openai":
        return openai_provider(spec, api_key="sk-test", env={})
    if kind == "anthropic":
        return AnthropicProvider(spec, api_key="sk-ant-test")
    if kind == "google":
        return GoogleProvider(spec, api_key="gm-test")
    return OpenAICompatProvider(spec)


# ---- the bodies, per provider ------------------------------------------------------------


def test_openai_sends_reasoning_effort(sim, bodies):
    ask(make("openai", sim.url, "gpt-5.1"), replace(PLAIN, reasoning_effort="high"))
    (body,) = bodies
    assert body["reasoning_effort"] == "high" and body["max_completion_tokens"] == 64
    assert "temperature" not in body and "thinking" not in body and "chat_template_kwargs" not in body


def test_openai_none_is_sent_where_accepted_and_minimal_on_gpt5():
    assert openai_effort("gpt-5.1", "none") == "none" and openai_effort("gpt-5.2-pro", "none") == "none"
    assert openai_effort("gpt-5", "none") == "minimal" and openai_effort("gpt-5-mini-2025-08-07", "none") == "minimal"
    assert openai_effort("gpt-5", "low") == "low"
    sent = make("openai", "http://127.0.0.1:9", "gpt-5-nano").describe_params(replace(PLAIN, reasoning_effort="none"))
    assert sent["reasoning_effort"] == "minimal"  # generation_sent shows what went, not what was asked


def test_anthropic_sends_thinking_with_room_and_no_temperature(sim, bodies):
    provider = make("anthropic", sim.url, "sim-model")
    provider.sampling = True  # an SDK that still sends temperature: it must not, with thinking on
    ask(provider, replace(PLAIN, temperature=0.0, thinking_budget=2048))
    (body,) = bodies
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 2048 + 64 and "temperature" not in body


def test_anthropic_effort_levels_become_budgets_and_none_sends_nothing(sim, bodies):
    for effort in ("low", "medium", "high", "none"):
        ask(make("anthropic", sim.url, "sim-model"), replace(PLAIN, max_tokens=20000, reasoning_effort=effort))
    thinking = [b.get("thinking") for b in bodies]
    assert thinking == [{"type": "enabled", "budget_tokens": n} for n in (1024, 4096, 16384)] + [None]
    assert [b["max_tokens"] for b in bodies] == [20000] * 4  # already above every budget: unchanged


def test_anthropic_generation_sent_says_max_tokens_was_raised():
    sent = make("anthropic", "http://127.0.0.1:9", "m").describe_params(replace(PLAIN, reasoning_effort="medium"))
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert sent["max_tokens"] == 4096 + 64 and "raised from 64" in sent["max_tokens_note"]
    assert sent["temperature"] is None and sent["reasoning_effort"] == "medium"


def test_gemini_sends_thinking_budget(sim, bodies):
    ask(make("google", sim.url, "gemini-2.5-flash"), replace(PLAIN, thinking_budget=3000))
    ask(make("google", sim.url, "gemini-2.5-flash"), replace(PLAIN, reasoning_effort="high"))
    ask(make("google", sim.url, "gemini-2.5-pro"), replace(PLAIN, reasoning_effort="none"))
    configs = [b["generationConfig"] for b in bodies]
    # the installed SDK writes the nested field in its proto name, which the API reads as it reads camelCase
    assert [_budget(c["thinkingConfig"]) for c in configs] == [3000, 16384, 0]
    # thoughts count against the output limit: room for the budget plus the answer
    assert [c["maxOutputTokens"] for c in configs] == [8192, 16384 + 64, 64]


def _budget(thinking: dict[str, Any]) -> Any:
    (key,) = set(thinking) & {"thinkingBudget", "thinking_budget"}
    return thinking[key]


def test_vllm_switches_the_chat_template(sim, bodies):
    for effort in ("high", "none"):
        ask(make("vllm", sim.url, "sim-model"), replace(PLAIN, reasoning_effort=effort))
    assert [b["chat_template_kwargs"] for b in bodies] == [{"enable_thinking": True}, {"enable_thinking": False}]
    assert all("reasoning_effort" not in b for b in bodies)
    # an --extra chat_template_kwargs object is merged in, key by key, and wins
    extra = replace(GenParams.with_extra({"chat_template_kwargs": {"enable_thinking": False, "x": 1}}, max_tokens=64),
                    reasoning_effort="low")
    ask(make("openai-compatible", sim.url, "sim-model"), extra)
    assert bodies[-1]["chat_template_kwargs"] == {"enable_thinking": False, "x": 1}


def test_without_the_flags_the_bodies_are_todays(sim, bodies):
    """The literal bodies of a plain request (what 0.2 sent before the switch existed)."""
    image = png().data_uri()
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image}},
                                             {"type": "text", "text": "Which colour?\nA. red\nB. green"}]}]
    ask(make("openai", sim.url, "gpt-4o"), PLAIN)
    ask(make("vllm", sim.url, "sim-model"), PLAIN)
    assert bodies[0] == {"model": "gpt-4o", "messages": messages, "max_completion_tokens": 64, "temperature": 0.0}
    assert bodies[1] == {"model": "sim-model", "messages": messages, "max_tokens": 64, "temperature": 0.0}
    assert list(bodies[1]) == ["model", "messages", "max_tokens", "temperature"]
    ask(make("anthropic", sim.url, "sim-model"), PLAIN)
    assert set(bodies[2]) == {"model", "messages", "max_tokens"} and bodies[2]["max_tokens"] == 64
    ask(make("google", sim.url, "gemini-2.5-flash"), PLAIN)
    config = bodies[3]["generationConfig"]
    assert set(config) == {"temperature", "maxOutputTokens", "thinkingConfig"} and config["maxOutputTokens"] == 64
    assert _budget(config["thinkingConfig"]) == 0  # flash models: thinking off by default, as before
    assert "reasoning_effort" not in PLAIN.to_dict() and "thinking_budget" not in PLAIN.to_dict()


# ---- the clear errors ----------------------------------------------------------------------


@pytest.mark.parametrize(("model", "flags", "needles"), [
    ("openai/gpt-5.1", ["--thinking-budget", "2048"], ["--thinking-budget", "openai/", "--reasoning-effort"]),
    ("vllm/qwen3", ["--thinking-budget", "2048"], ["--thinking-budget", "vllm/"]),
    ("openai-compatible/m", ["--thinking-budget", "1"], ["--thinking-budget", "openai-compatible/"]),
    ("anthropic/claude-x", ["--thinking-budget", "500"], ["--thinking-budget", "anthropic/", "1024"]),
    ("openai/o3", ["--reasoning-effort", "none"], ["--reasoning-effort none", "openai/o3"]),
    ("google/gemini-2.5-flash", ["--reasoning-effort", "low", "--thinking-budget", "9"],
     ["--reasoning-effort", "--thinking-budget"]),
])
def test_refused_combinations_are_one_line_and_exit_2(capsys, tmp_path, monkeypatch, model, flags, needles):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)  # the settings are refused before any key is looked for
    data = make_mcq_jsonl(tmp_path / "ds", 2)
    out = tmp_path / "run"
    code = cli_main(["run", "mcq", "--model", model, "--data", str(data), "--out", str(out), "--no-progress", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("evalkit: error: "), err
    assert all(n in err for n in needles), err
    assert not out.exists()  # nothing written


def test_python_api_refuses_the_same_way(tmp_path):
    # the provider's refusal is its record's, read when the run resolves its model: before anything is written
    with pytest.raises(EvalkitError, match=r"--thinking-budget: openai/"):
        evalkit.run("mcq", "openai/gpt-5.1", thinking_budget=1024, out=str(tmp_path / "run"), env={})
    assert not (tmp_path / "run").exists()
    with pytest.raises(EvalkitError, match="must be one of none, low, medium, high"):
        build(RunConfig, {"model": "openai/gpt-5.1", "reasoning_effort": "max"})
    with pytest.raises(EvalkitError, match="at least 0"):
        build(RunConfig, {"model": "google/gemini-2.5-flash", "thinking_budget": -1})
    # a provider handed a budget it has no field for refuses it rather than dropping it
    with pytest.raises(ProviderError, match="--thinking-budget: openai/"):
        make("openai", "http://127.0.0.1:9", "gpt-5.1").body(MESSAGES, replace(PLAIN, thinking_budget=5), [png()])


# ---- settings and identity -----------------------------------------------------------------


def test_settings_and_mapping_agree():
    by_name = {f.name: f for f in fields(RunConfig)}
    assert by_name["reasoning_effort"].metadata["choices"] == EFFORTS
    assert by_name["reasoning_effort"].metadata["role"] == by_name["thinking_budget"].metadata["role"] == "generation"
    assert set(EFFORT_BUDGETS) == set(EFFORTS) and EFFORT_BUDGETS["none"] == 0


def test_identity_only_when_set():
    plain = build(RunConfig, {"model": "anthropic/claude-x", "max_tokens": 512})
    assert non_default(plain, roles=("identity", "generation")) == {"max_tokens": 512}
    assert "reasoning_effort" not in plain.generation() or plain.generation()["reasoning_effort"] is None
    high = build(RunConfig, {"model": "anthropic/claude-x", "reasoning_effort": "high"})
    assert non_default(high, roles=("identity", "generation")) == {"reasoning_effort": "high"}
    budget = build(RunConfig, {"model": "anthropic/claude-x", "thinking_budget": 2048})
    assert non_default(budget, roles=("identity", "generation")) == {"thinking_budget": 2048}


def test_cache_key_moves_only_when_set():
    from evalkit.ask.request_key import _params_dict_of

    assert set(_params_dict_of(PLAIN)) == {"temperature", "max_tokens", "seed", "stop", "top_p", "extra"}
    assert _params_dict_of(replace(PLAIN, reasoning_effort="low"))["reasoning_effort"] == "low"


# ---- a whole run (needs the settings carried into each query's GenParams) --------------------


def _wired() -> bool:
    from evalkit.benchmarks.prepare import apply_generation

    q = Query(id="q", item_id="i", base_id="i", variant={}, messages=(), gold="A")
    (out,) = apply_generation([q], {"reasoning_effort": "high"})
    return out.params.reasoning_effort == "high"


def test_cli_run_sends_the_switch_and_reports_it(tmp_path, bodies, no_plots):
    if not _wired():
        pytest.skip("apply_generation (evalkit/benchmarks/prepare.py) does not carry reasoning_effort yet")
    data = make_mcq_jsonl(tmp_path / "ds", 3)
    out = tmp_path / "run"
    with SimThread() as s:
        code = cli_main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", s.url, "--data", str(data),
                         "--out", str(out), "--no-cache", "--no-progress", "--reasoning-effort", "high"])
    assert code == 0 and len(bodies) == 3
    assert all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in bodies)
    config = json.loads((out / "config.json").read_text())
    assert config["identity"]["reasoning_effort"] == "high"
    assert config["config"]["generation_sent"]["chat_template_kwargs"] == {"enable_thinking": True}
