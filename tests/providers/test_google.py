"""`google/<model>`: the real google-genai SDK against the simulator's Gemini dialect."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from PIL import Image
from synthetic_data import draw_image

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message
from evalkit.images.pipeline import PreparedImage
from evalkit.providers import parse_spec
from evalkit.providers.google.client import (
    GoogleProvider,
    gemini_contents,
    generation_settings,
    thinking_mode,
)
from evalkit.providers.google.reply import response_from_gemini
from evalkit.sim.gemini import EDIT_TEXT, simulated_edit
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.model import SimParams
from evalkit.sim.openai import edits
from evalkit.sim.server import SimConfig, start_sim

KEY = "gm-test-SECRET77"
ENV = {"GEMINI_API_KEY": KEY}
OPTIONS = "A. red\nB. green\nC. blue\nD. white"


def png(seed: int, size: int = 96) -> PreparedImage:
    buf = io.BytesIO()
    draw_image(seed, size).save(buf, "PNG")
    return PreparedImage(buf.getvalue(), "image/png", size, size)


def user(n_images: int, text: str) -> Message:
    return Message.user(*[ImagePart(ImageRef.from_bytes(bytes([i]))) for i in range(n_images)], text)


def provider(url: str, model: str = "sim-model") -> GoogleProvider:
    return GoogleProvider(parse_spec(f"google/{model}", [url]), api_key=KEY)


def sdk(url: str) -> genai.Client:
    return genai.Client(api_key=KEY, vertexai=False, http_options=types.HttpOptions(
        base_url=url, timeout=10_000, retry_options=types.HttpRetryOptions(attempts=1)))


def read_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def tokens(text: str) -> int:
    return -(-len(text) // 4)


# ---- request translation -----------------------------------------------------------------

def test_contents_keep_order_and_system_becomes_the_instruction():
    imgs = [png(1), png(2)]
    system, contents = gemini_contents([Message.system("be brief"), user(2, "Which?")], imgs)
    assert system == "be brief" and len(contents) == 1 and contents[0].role == "user"
    parts = contents[0].parts
    assert [p.inline_data.data for p in parts[:2]] == [imgs[0].data, imgs[1].data]
    assert parts[0].inline_data.mime_type == "image/png" and parts[2].text == "Which?"


def test_thinking_defaults_and_pass_through():
    base = GenParams(max_tokens=64, stop=("\n",), top_p=0.9, seed=7)
    flash = generation_settings("gemini-2.5-flash", base)
    assert flash["thinking_config"] == {"thinking_budget": 0} and flash["max_output_tokens"] == 64
    assert flash["stop_sequences"] == ["\n"] and flash["seed"] == 7 and flash["top_p"] == 0.9
    pro = generation_settings("gemini-2.5-pro", base)
    assert "thinking_config" not in pro and pro["max_output_tokens"] == 8192
    assert "thinking_config" not in generation_settings("gemini-2.0-flash", base)  # rejected there
    assert "thinking_config" not in generation_settings("gemini-2.5-flash-image", base)
    assert (thinking_mode("gemini-3-pro-preview"), thinking_mode("models/gemini-2.5-flash-lite")) == ("always", "off")
    budget = generation_settings("gemini-2.5-flash", GenParams.with_extra(
        {"thinking_budget": 1024, "response_mime_type": "text/plain", "topK": 3}, max_tokens=64))
    assert budget["thinking_config"] == {"thinking_budget": 1024} and budget["max_output_tokens"] == 8192
    assert budget["response_mime_type"] == "text/plain" and budget["topK"] == 3
    types.GenerateContentConfig(**budget)  # the SDK accepts every key
    with pytest.raises(ProviderError) as info:
        generation_settings("gemini-2.5-flash", GenParams.with_extra({"guided_choice": ["A"]}))
    assert info.value.kind == "permanent" and "guided_choice" in info.value.message
    described = provider("http://127.0.0.1:9", "gemini-2.5-pro").describe_params(base)
    assert described["max_tokens"] == 8192 and described["thinking_budget"] is None and "8192" in described["note"]
    assert provider("http://127.0.0.1:9", "gemini-2.5-flash").describe_params(base)["thinking_budget"] == 0


def test_safety_finish_without_text_is_a_refusal_and_thoughts_are_reasoning():
    with pytest.raises(ProviderError) as info:
        response_from_gemini({"candidates": [{"finishReason": "SAFETY"}]})
    assert info.value.kind == "refused" and "SAFETY" in info.value.message
    with pytest.raises(ProviderError) as info:
        response_from_gemini({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})
    assert info.value.kind == "refused" and "PROHIBITED_CONTENT" in info.value.message
    mixed = {"candidates": [{"finishReason": "STOP", "content": {"role": "model", "parts": [
        {"text": "think", "thought": True}, {"text": "B"}]}}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "cachedContentTokenCount": 4,
                          "thoughtsTokenCount": 5}}
    out = response_from_gemini(mixed)
    assert (out.text, out.reasoning, out.finish_reason) == ("B", "think", "STOP")
    assert out.usage.to_dict() == {"input_tokens": 10, "output_tokens": 1, "cached_input_tokens": 4,
                                   "reasoning_tokens": 5}


@pytest.mark.parametrize("reply, what", [
    ({}, "no candidates and no block reason"),
    ({"candidates": [], "promptFeedback": {}}, "no candidates and no block reason"),
    ({"candidates": [{"content": {"parts": [{"text": 7}]}}]}, "parts[0].text is a number, not text"),
    ({"candidates": [{"content": {"parts": "B"}}]}, "candidates[0].content.parts is a string, not a list"),
    ({"candidates": ["B"]}, "candidates[0] is a string, not an object"),
])
def test_a_reply_without_a_usable_candidate_is_malformed_not_empty(reply, what):
    with pytest.raises(ProviderError) as info:
        response_from_gemini(reply)
    assert (info.value.kind, info.value.message) == ("transient", f"malformed reply: {what}")


def test_bad_token_counts_are_zero_and_the_answer_is_kept():
    reply = {"candidates": [{"content": {"parts": [{"text": "C"}]}, "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": "12", "candidatesTokenCount": -3, "cachedContentTokenCount": 2.5,
                               "thoughtsTokenCount": True}}
    out = response_from_gemini(reply)
    assert out.text == "C" and out.usage.to_dict() == {"input_tokens": 0, "output_tokens": 0,
                                                       "cached_input_tokens": 0, "reasoning_tokens": 0}
    assert response_from_gemini({**reply, "usageMetadata": "lots"}).text == "C"


async def test_an_unfinished_answer_is_resumed_with_its_continuation_token():
    """The provider reads raw bodies, so it resumes a CONTINUATION reply itself, as the SDK would: texts
    joined, counts added, the last hop's finish reason."""
    hops = [{"candidates": [{"content": {"parts": [{"text": "The answer "}]}, "finishReason": "CONTINUATION",
                             "continuationToken": "dG9rZW4tMQ=="}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3}},
            {"candidates": [{"content": {"parts": [{"text": "is B."}]}, "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}}]
    tokens = []

    async def generate_content(*, model, contents, config):
        tokens.append(config.continuation_token)
        assert config.should_return_http_response is True
        return SimpleNamespace(sdk_http_response=SimpleNamespace(body=json.dumps(hops[len(tokens) - 1])))

    p = provider("http://127.0.0.1:9")
    p._client.aio.models.generate_content = generate_content  # no server: the two hops above
    try:
        out = await p.complete([Message.user("Which?")], GenParams(max_tokens=8), [])
    finally:
        await p.close()
    assert tokens == [None, b"token-1"]
    assert (out.text, out.finish_reason) == ("The answer is B.", "STOP")
    assert (out.usage.input_tokens, out.usage.output_tokens) == (20, 5)


def test_retry_after_header_wins_over_retry_info():
    p = provider("http://127.0.0.1:9")
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": f"quota for {KEY}", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}]}}
    with_header = genai_errors.ClientError(429, body, SimpleNamespace(headers={"retry-after": "3"}))
    without = genai_errors.ClientError(429, body, SimpleNamespace(headers={}))
    assert p._classify(with_header).retry_after == 3.0
    e = p._classify(without)
    assert e.retry_after == 2.0 and e.kind == "rate_limit" and KEY not in e.message


# ---- the SDK against the simulator ---------------------------------------------------------


async def test_raw_sdk_shapes_thoughts_length_and_prefix_cache():
    img = png(5, size=600)
    long_text = "Describe carefully.\n" + "context line with some words in it\n" * 140 + OPTIONS
    contents = [types.Part.from_bytes(data=img.data, mime_type="image/png"), long_text]
    async with await start_sim(SimConfig()) as sim:
        client = sdk(sim.url)
        try:
            first = await client.aio.models.generate_content(model="sim-model", contents=contents)
            again = await client.aio.models.generate_content(
                model="sim-model", contents=contents, config=types.GenerateContentConfig(
                    thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=512)))
            with pytest.raises(genai_errors.ClientError) as bad:
                await client.aio.models.generate_content(model="sim-model", contents="hi",
                                                         config=types.GenerateContentConfig(temperature=5))
        finally:
            await client.aio.aclose()
    assert first.candidates[0].finish_reason == types.FinishReason.STOP
    assert first.model_version == "sim-model" and first.response_id and first.text in "ABCD"
    assert first.usage_metadata.cached_content_token_count is None  # omitted when nothing was cached
    assert again.usage_metadata.cached_content_token_count >= 1024
    parts = again.candidates[0].content.parts
    assert parts[0].thought and parts[0].text and not parts[1].thought
    assert again.usage_metadata.thoughts_token_count > 0
    assert bad.value.code == 400 and bad.value.status == "INVALID_ARGUMENT"


async def test_provider_reads_cache_thoughts_and_max_tokens():
    img = png(6, size=600)
    long_text = "Describe carefully.\n" + "context line with some words in it\n" * 140 + OPTIONS
    params = GenParams.with_extra({"thinking_config": {"include_thoughts": True, "thinking_budget": 256}})
    async with await start_sim(SimConfig(params=SimParams(style="verbose"))) as sim:
        p = provider(sim.url)
        try:
            await p.complete([user(1, long_text)], GenParams(), [img])
            out = await p.complete([user(1, long_text)], params, [img])
            cut = await p.complete([user(1, f"Colour?\n{OPTIONS}")], GenParams(max_tokens=3), [png(7)])
        finally:
            await p.close()
    assert out.usage.cached_input_tokens >= 1024 and out.usage.input_tokens > out.usage.cached_input_tokens
    assert out.reasoning and out.usage.reasoning_tokens > 0 and out.text.startswith("Looking at the image")
    assert out.reasoning not in out.text  # thought parts are kept out of the answer
    assert cut.finish_reason == "MAX_TOKENS" and 0 < len(cut.text) <= 12 and out.finish_reason == "STOP"


@pytest.mark.parametrize("fault, kind, status, google_status", [
    ("503", "transient", 503, "UNAVAILABLE"),
    ("500", "transient", 500, "INTERNAL"),
    ("429", "rate_limit", 429, "RESOURCE_EXHAUSTED"),
    ("400", "permanent", 400, "INVALID_ARGUMENT"),
    ("drop", "transient", None, None),
])
async def test_errors_are_classified(fault, kind, status, google_status):
    faults = SimFaults(rate=1.0, kinds=(fault,), retry_after=0.05)
    async with await start_sim(SimConfig(faults=faults)) as sim:
        p = provider(sim.url)
        client = sdk(sim.url)
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete([user(1, "Colour?")], GenParams(), [png(1)])
            requests = sim.counters.snapshot()["requests"]  # read once complete() has given up: no retry can follow
            if status is not None:
                with pytest.raises(genai_errors.APIError) as raw:
                    await client.aio.models.generate_content(model="sim-model", contents="hi")
                assert raw.value.code == status and raw.value.status == google_status
                assert "retry-after" not in {k.lower() for k in raw.value.response.headers}
        finally:
            await p.close()
            await client.aio.aclose()
    e = info.value
    assert e.kind == kind and e.status == status and KEY not in e.message
    # no SDK retries, not even its hidden one for connection errors (aiohttp's: a 1-10 s sleep, then the same
    # request again): every retry reaches the server, and complete() returns only after it
    assert requests == 1
    if fault == "503":
        assert "overloaded" in e.message
    if fault == "429":
        assert e.retry_after == pytest.approx(0.05)  # from RetryInfo.retryDelay


# ---- image output (GenViP editing through Gemini) ---------------------------------------------

async def test_image_output_is_the_simulated_edit():
    src = png(31, size=80).data
    async with await start_sim(SimConfig()) as sim:
        client = sdk(sim.url)
        try:
            resp = await client.aio.models.generate_content(
                model="gemini-2.5-flash-image",
                contents=[types.Part.from_bytes(data=src, mime_type="image/png"), "Turn this infrared image into RGB."],
                config=types.GenerateContentConfig(response_modalities=["TEXT", "IMAGE"]))
            text_only = await client.aio.models.generate_content(
                model="gemini-2.5-flash-image", contents=[types.Part.from_bytes(data=src, mime_type="image/png"), "?"])
        finally:
            await client.aio.aclose()
    parts = resp.candidates[0].content.parts
    assert parts[0].text == EDIT_TEXT
    blob = parts[1].inline_data
    assert blob.mime_type == "image/png" and blob.data == simulated_edit(src)
    with Image.open(io.BytesIO(blob.data)) as out, Image.open(io.BytesIO(src)) as inp:
        assert out.size == inp.size and not np.array_equal(np.asarray(out.convert("RGB")), np.asarray(inp))
    assert edits.simulated_edit(src) == blob.data  # the OpenAI image-edit route gives the same picture
    assert resp.usage_metadata.candidates_token_count >= 1290
    assert all(p.inline_data is None for p in text_only.candidates[0].content.parts)
