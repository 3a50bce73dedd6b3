"""`evalkit sim --think-tokens N`: the simulated model thinks before it answers when a request turns
reasoning on, and a request whose output limit is too small is cut off while thinking, in each API's
own shape. Asked through the real SDKs (openai for OpenAI and vLLM, anthropic, google-genai); the
bodies of requests without reasoning stay byte for byte what they were."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from google import genai
from google.genai import types
from sim_helpers import MCQ_TEXT, data_uri, make_png, user_message

from evalkit.core.fingerprint import fingerprint_bytes
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, is_cut_off
from evalkit.images.pipeline import PreparedImage
from evalkit.providers import parse_spec
from evalkit.providers.anthropic.client import AnthropicProvider
from evalkit.providers.google.client import GoogleProvider
from evalkit.providers.openai.api import openai_provider
from evalkit.providers.openai.compat import OpenAICompatProvider
from evalkit.sim.args import add_sim_arguments, config_from_args
from evalkit.sim.machinery.counters import server_request_key
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, start_sim
from evalkit.sim.thinking import SIGNATURE, think_length, thinking_style, thinking_text

N = 4000  # T falls in [2000, 6000]: above Anthropic's smallest thinking budget, as real requests are
PNG = make_png("circle", 64)
FP = fingerprint_bytes(PNG)
T = think_length(N, 0, MCQ_TEXT, [FP])  # what the seed-0 server thinks about the question
ANSWER_TOKENS = 2  # a one-letter answer, as the simulator counts it (estimate + 1)
CUT, ENOUGH = T + ANSWER_TOKENS - 1, T + ANSWER_TOKENS  # the largest budget that cuts, the smallest that does not
MESSAGES = [user_message(MCQ_TEXT, PNG)]
ANTHROPIC_MESSAGES = [{"role": "user", "content": [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data_uri(PNG).split(",")[1]}},
    {"type": "text", "text": MCQ_TEXT}]}]
GEMINI_CONTENTS = [types.Part.from_bytes(data=PNG, mime_type="image/png"), MCQ_TEXT]


def config(think: int = N, seed: int = 0) -> SimConfig:
    return SimConfig(params=SimParams(seed=seed), think_tokens=think)


def oai(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


def gemini(url: str) -> genai.Client:
    return genai.Client(api_key="gm-test", vertexai=False, http_options=types.HttpOptions(
        base_url=url, timeout=10_000, retry_options=types.HttpRetryOptions(attempts=1)))


def gemini_config(budget: int, *, include: bool = True) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(max_output_tokens=budget, thinking_config=types.ThinkingConfig(
        thinking_budget=1024, include_thoughts=include))


def test_the_question_thinks_within_half_to_one_and_a_half_n():
    assert N // 2 <= T <= N + N // 2 and CUT > 1024
    lengths = {think_length(N, 0, f"question {i}", []) for i in range(40)}
    assert min(lengths) >= N // 2 and max(lengths) <= N + N // 2 and len(lengths) > 30  # drawn per question
    assert think_length(N, 1, MCQ_TEXT, [FP]) != T  # and per seed
    assert think_length(1, 0, "q", []) >= 1
    assert len(thinking_text(7)) == 28 and not re.search(r"\b[A-Z]\b", thinking_text(500))  # no option letter


def test_what_turns_reasoning_on_in_each_dialect():
    on = [("openai", {"reasoning_effort": "low"}), ("openai", {"chat_template_kwargs": {"enable_thinking": True}}),
          ("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
          ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 512}}}),
          ("gemini", {"generation_config": {"thinking_config": {"thinking_budget": -1}}}),
          ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingLevel": "high"}}})]
    assert [thinking_style(d, b) for d, b in on] == ["openai", "vllm", "anthropic", "gemini", "gemini", "gemini"]
    off = [("openai", {}), ("openai", {"reasoning_effort": "none"}), ("openai", {"reasoning_effort": "minimal"}),
           ("openai", {"chat_template_kwargs": {"enable_thinking": False}}), ("anthropic", {"thinking": None}),
           ("anthropic", {"thinking": {"type": "disabled"}}),
           ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0, "includeThoughts": True}}}),
           ("gemini", {"generationConfig": {"maxOutputTokens": 9}})]
    assert [thinking_style(d, b) for d, b in off] == [None] * len(off)


async def test_openai_cut_off_is_empty_with_every_token_reasoning():
    async with await start_sim(config()) as sim:
        client = oai(sim.url)
        plain = await client.chat.completions.create(model="sim-model", messages=MESSAGES)
        cut = await client.chat.completions.create(model="sim-model", messages=MESSAGES, reasoning_effort="high",
                                                   max_completion_tokens=CUT)
        done = await client.chat.completions.create(model="sim-model", messages=MESSAGES, reasoning_effort="high",
                                                    max_completion_tokens=ENOUGH)
        await client.close()
        counters = sim.counters.snapshot()
    answer = plain.choices[0].message.content
    assert re.fullmatch("[ABCD]", answer) and plain.usage.completion_tokens == ANSWER_TOKENS
    assert plain.usage.completion_tokens_details is None  # no reasoning asked: today's reply
    assert cut.choices[0].message.content == "" and cut.choices[0].finish_reason == "length"
    assert cut.usage.completion_tokens == CUT and cut.usage.completion_tokens_details.reasoning_tokens == CUT
    assert done.choices[0].message.content == answer and done.choices[0].finish_reason == "stop"
    assert done.usage.completion_tokens == T + ANSWER_TOKENS and done.usage.completion_tokens_details.reasoning_tokens == T
    key = server_request_key({"model": "sim-model", "messages": MESSAGES})
    assert counters["cutoffs"] == 1 and counters["per_key_cutoffs"] == {key: 1}
    assert counters["completions"] == 2  # the cut-off is not an answer


async def test_vllm_cut_off_is_an_unclosed_think_block():
    thinking = {"chat_template_kwargs": {"enable_thinking": True}}
    async with await start_sim(config()) as sim:
        client = oai(sim.url)
        cut = await client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=CUT,
                                                   extra_body=thinking)
        done = await client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=ENOUGH,
                                                    extra_body=thinking)
        plain = await client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=ENOUGH)
        await client.close()
        assert sim.counters["cutoffs"] == 1
    answer = plain.choices[0].message.content
    assert cut.choices[0].message.content == "<think>\n" + thinking_text(CUT)
    assert "</think>" not in cut.choices[0].message.content and cut.choices[0].finish_reason == "length"
    assert cut.usage.completion_tokens == CUT and cut.usage.completion_tokens_details is None
    assert done.choices[0].message.content == f"<think>\n{thinking_text(T)}\n</think>\n\n{answer}"
    assert done.choices[0].finish_reason == "stop" and done.usage.completion_tokens == T + ANSWER_TOKENS


async def test_anthropic_cut_off_is_a_lone_thinking_block():
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    async with await start_sim(config()) as sim:
        client = anthropic.AsyncAnthropic(api_key="sk-ant", base_url=sim.url, max_retries=0)
        cut = await client.messages.create(model="sim-model", max_tokens=CUT, thinking=thinking,
                                           messages=ANTHROPIC_MESSAGES)
        done = await client.messages.create(model="sim-model", max_tokens=ENOUGH, thinking=thinking,
                                            messages=ANTHROPIC_MESSAGES)
        plain = await client.messages.create(model="sim-model", max_tokens=ENOUGH, messages=ANTHROPIC_MESSAGES)
        await client.close()
        assert sim.counters["cutoffs"] == 1
    ((block,),) = [cut.content]
    assert block.type == "thinking" and block.thinking == thinking_text(CUT) and block.signature == SIGNATURE
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == CUT
    ((answer,),) = [plain.content]
    assert [b.type for b in done.content] == ["thinking", "text"] and done.content[1].text == answer.text
    assert done.content[0].thinking == thinking_text(T)
    assert done.stop_reason == "end_turn" and done.usage.output_tokens == T + ANSWER_TOKENS
    assert plain.usage.output_tokens == ANSWER_TOKENS


async def test_gemini_cut_off_is_a_thought_and_max_tokens():
    async with await start_sim(config()) as sim:
        client = gemini(sim.url)
        try:
            cut = await client.aio.models.generate_content(model="sim-model", contents=GEMINI_CONTENTS,
                                                           config=gemini_config(CUT))
            done = await client.aio.models.generate_content(model="sim-model", contents=GEMINI_CONTENTS,
                                                            config=gemini_config(ENOUGH))
            hidden = await client.aio.models.generate_content(model="sim-model", contents=GEMINI_CONTENTS,
                                                              config=gemini_config(CUT, include=False))
            quiet = await client.aio.models.generate_content(model="sim-model", contents=GEMINI_CONTENTS,
                                                             config=gemini_config(ENOUGH, include=False))
        finally:
            await client.aio.aclose()
        assert sim.counters["cutoffs"] == 2
    (cand,) = cut.candidates
    assert cand.finish_reason == types.FinishReason.MAX_TOKENS
    ((part,),) = [cand.content.parts]
    assert part.thought is True and part.text == thinking_text(CUT)
    meta = cut.usage_metadata
    assert meta.thoughts_token_count == CUT and meta.candidates_token_count is None
    assert meta.total_token_count == meta.prompt_token_count + CUT
    (cand,) = done.candidates
    assert cand.finish_reason == types.FinishReason.STOP and [p.thought for p in cand.content.parts] == [True, None]
    assert cand.content.parts[0].text == thinking_text(T) and re.fullmatch("[ABCD]", done.text)
    assert done.usage_metadata.thoughts_token_count == T
    assert done.usage_metadata.candidates_token_count == ANSWER_TOKENS
    # without includeThoughts the thinking is counted, never returned: a cut-off has no parts at all
    assert hidden.candidates[0].content.parts is None and hidden.text is None
    assert hidden.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert hidden.usage_metadata.thoughts_token_count == CUT
    assert quiet.text == done.text and len(quiet.candidates[0].content.parts) == 1
    assert quiet.usage_metadata.thoughts_token_count == T


async def test_evalkit_providers_read_each_cut_off_as_one():
    """evalkit's four providers read a cut-off as one (Google's room of at least 8192 tokens outlasts
    this T: it answers), and a larger output limit turns each into an answer."""
    image = PreparedImage(PNG, "image/png", 64, 64)
    msgs = [Message.user(ImagePart(ImageRef.from_bytes(PNG)), MCQ_TEXT)]
    async with await start_sim(config()) as sim:
        providers = {
            "openai": (openai_provider(parse_spec("openai/gpt-5.1", [sim.url]), api_key="sk", env={}),
                       {"reasoning_effort": "low"}),
            "vllm": (OpenAICompatProvider(parse_spec("vllm/sim-model", [sim.url])), {"reasoning_effort": "low"}),
            "anthropic": (AnthropicProvider(parse_spec("anthropic/sim-model", [sim.url]), api_key="sk-ant"),
                          {"thinking_budget": 1024}),
            "google": (GoogleProvider(parse_spec("google/gemini-2.5-flash", [sim.url]), api_key="gm"),
                       {"thinking_budget": 1024}),
        }
        for name, (provider, flags) in providers.items():
            try:
                # the providers give the answer room above a thinking budget: 1024 + max_tokens (Gemini:
                # at least 8192), so only a T above that is cut off
                small = await provider.complete(msgs, GenParams(max_tokens=10, **flags), [image])
                large = await provider.complete(msgs, GenParams(max_tokens=2 * N, **flags), [image])
            finally:
                await provider.close()
            sent = {"openai": 10, "vllm": 10, "anthropic": 1024 + 10, "google": 8192}[name]  # the output limit
            assert is_cut_off(small.text, small.finish_reason) is (sent < T + ANSWER_TOKENS), name
            assert not is_cut_off(large.text, large.finish_reason), name
            assert re.search("[ABCD]", large.text.split("</think>")[-1]), name
            if name in ("openai", "google"):  # the APIs that count thinking apart (Anthropic and vLLM do not)
                assert large.usage.reasoning_tokens == T, name


async def _raw(session: aiohttp.ClientSession, url: str, path: str, body: dict[str, Any]) -> bytes:
    headers = {"x-goog-api-key": "gm"} if ":generateContent" in path else {}
    async with session.post(url + path, json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        # OpenAI's `created` is the clock's: the only field two servers may differ in
        return re.sub(rb'"created": \d+', b'"created": 0', await resp.read())


GEMINI_PATH = "/v1beta/models/sim-model:generateContent"
GEMINI_PLAIN = {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png",
                                                                         "data": data_uri(PNG).split(",")[1]}},
                                                        {"text": MCQ_TEXT}]}]}
OFF = [
    ("/v1/chat/completions", {"model": "sim-model", "messages": MESSAGES, "max_tokens": 5}),
    ("/v1/chat/completions", {"model": "sim-model", "messages": MESSAGES, "max_completion_tokens": 5,
                              "reasoning_effort": "none"}),
    ("/v1/chat/completions", {"model": "sim-model", "messages": MESSAGES, "reasoning_effort": "minimal"}),
    ("/v1/chat/completions", {"model": "sim-model", "messages": MESSAGES, "max_tokens": 5,
                              "chat_template_kwargs": {"enable_thinking": False}}),
    ("/v1/messages", {"model": "sim-model", "max_tokens": 5, "messages": ANTHROPIC_MESSAGES}),
    (GEMINI_PATH, {**GEMINI_PLAIN, "generationConfig": {"maxOutputTokens": 5, "thinkingConfig": {
        "thinkingBudget": 0, "includeThoughts": True}}}),
    (GEMINI_PATH, GEMINI_PLAIN),
]


async def test_reasoning_off_replies_are_byte_identical_to_a_server_that_does_not_think():
    async with await start_sim(config(0)) as today, await start_sim(config()) as thinker, \
            aiohttp.ClientSession() as session:
        for path, body in OFF:
            assert await _raw(session, today.url, path, body) == await _raw(session, thinker.url, path, body), body
        assert thinker.counters["cutoffs"] == 0


async def test_without_think_tokens_reasoning_requests_are_answered_as_without_the_flags():
    flagged = [{"reasoning_effort": "high"}, {"chat_template_kwargs": {"enable_thinking": True}}]
    async with aiohttp.ClientSession() as session:
        for extra in flagged:
            async with await start_sim(config(0)) as a, await start_sim(config(0)) as b:
                body = {"model": "sim-model", "messages": MESSAGES, "max_tokens": 3}
                assert await _raw(session, a.url, "/v1/chat/completions", {**body, **extra}) == \
                    await _raw(session, b.url, "/v1/chat/completions", body)


async def test_t_is_the_same_on_two_servers_with_one_seed_and_differs_with_another():
    async def thought(seed: int) -> int:
        async with await start_sim(config(seed=seed)) as sim:
            client = oai(sim.url)
            reply = await client.chat.completions.create(model="sim-model", messages=MESSAGES,
                                                         reasoning_effort="low")
            await client.close()
            return reply.usage.completion_tokens_details.reasoning_tokens

    assert await thought(0) == await thought(0) == T
    assert await thought(1) == think_length(N, 1, MCQ_TEXT, [FP]) != T


async def test_batched_lines_get_the_live_replies_and_count_as_cut_offs():
    lines = [{"custom_id": cid, "params": {"model": "sim-model", "max_tokens": budget, "messages": ANTHROPIC_MESSAGES,
                                           "thinking": {"type": "enabled", "budget_tokens": 1024}}}
             for cid, budget in (("cut", CUT), ("done", ENOUGH))]
    async with await start_sim(config()) as sim, aiohttp.ClientSession() as session:
        live = [json.loads(await _raw(session, sim.url, "/v1/messages", line["params"])) for line in lines]
        async with session.post(sim.url + "/v1/messages/batches", json={"requests": lines}) as resp:
            batch = await resp.json()
        async with session.get(f"{sim.url}/v1/messages/batches/{batch['id']}/results") as resp:
            results = {row["custom_id"]: row["result"] for row in map(json.loads, (await resp.text()).splitlines())}
        counters = sim.counters.snapshot()
    for line, reply in zip(lines, live, strict=True):
        message = results[line["custom_id"]]["message"]
        assert {**message, "id": ""} == {**reply, "id": ""}
    assert results["cut"]["message"]["stop_reason"] == "max_tokens"
    assert [b["type"] for b in results["done"]["message"]["content"]] == ["thinking", "text"]
    assert counters["cutoffs"] == 2 and counters["per_key_cutoffs"] == {server_request_key(lines[0]["params"]): 2}


def test_the_flag_and_the_python_field():
    import argparse

    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    assert config_from_args(parser.parse_args(["--think-tokens", "300"])).think_tokens == 300
    assert config_from_args(parser.parse_args([])).think_tokens == 0
    with pytest.raises(ValueError, match="think tokens"):
        config_from_args(parser.parse_args(["--think-tokens", "-1"]))
