"""`anthropic/<model>`: the real SDK against the simulator's Messages dialect, faults and prompt caching."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import aiohttp
import anthropic
import pytest
from synthetic_data import draw_image

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message
from evalkit.engine.evaluate import run
from evalkit.images.pipeline import PreparedImage
from evalkit.providers import create_provider, parse_spec
from evalkit.providers.anthropic.client import AnthropicProvider, request_args
from evalkit.sim.anthropic import PromptCache
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread, start_sim

KEY = "sk-ant-test-SECRET42"
ENV = {"ANTHROPIC_API_KEY": KEY}
OPTIONS = "A. red\nB. green\nC. blue\nD. white"


def png(seed: int, size: int = 96) -> PreparedImage:
    buf = io.BytesIO()
    draw_image(seed, size).save(buf, "PNG")
    return PreparedImage(buf.getvalue(), "image/png", size, size)


def user(n_images: int, text: str) -> Message:
    return Message.user(*[ImagePart(ImageRef.from_bytes(bytes([i]))) for i in range(n_images)], text)


def provider(url: str, **kw) -> AnthropicProvider:
    return AnthropicProvider(parse_spec("anthropic/sim-model", [url]), api_key=KEY, **kw)


def read_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


# ---- request translation -----------------------------------------------------------------

def test_request_blocks_in_order_with_one_cache_marker_and_params():
    imgs = [png(1), png(2)]
    msgs = [Message.system("be brief"), user(2, "Which?")]
    params = GenParams.with_extra({"thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u"}},
                                  max_tokens=2048, seed=7, stop=("\n",), top_p=0.9)
    args = request_args("m", msgs, params, imgs)
    assert args["system"] == "be brief" and args["max_tokens"] == 2048 and args["stop_sequences"] == ["\n"]
    blocks = args["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["image", "image", "text"]
    assert [b["source"]["data"] for b in blocks[:2]] == [imgs[0].b64(), imgs[1].b64()]
    assert blocks[0]["source"]["media_type"] == "image/png"
    assert "cache_control" not in blocks[0] and blocks[1]["cache_control"] == {"type": "ephemeral"}
    assert args["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert args["extra_body"] == {"metadata": {"user_id": "u"}}
    assert not {"seed", "temperature", "top_p"} & set(args)  # API 2026-10-21 takes none of them
    # an old SDK (API 2023-06-01) gets sampling parameters, but no temperature with thinking on
    old = request_args("m", msgs, params, imgs, sampling=True)
    assert old["top_p"] == 0.9 and "temperature" not in old
    assert request_args("m", msgs, GenParams(), imgs, sampling=True)["temperature"] == 0.0
    plain = request_args("m", msgs, GenParams(), imgs, cache_marker=False)
    assert all("cache_control" not in b for b in plain["messages"][0]["content"])
    assert "thinking" not in plain and "extra_body" not in plain  # thinking off by default: nothing sent


def test_describe_params_says_what_is_not_sent():
    p = provider("http://127.0.0.1:9")
    d = p.describe_params(GenParams(seed=3, temperature=0.0, max_tokens=16))
    assert d["seed"] is None and d["temperature"] is None and d["max_tokens"] == 16 and "seed" in d["note"]
    assert d["cache_control"] == "ephemeral on the last image"


# ---- the SDK against the simulator ---------------------------------------------------------


async def test_raw_sdk_sees_the_real_message_shape_and_cache_split():
    img = png(5)
    msgs = [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": img.b64()},
         "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": f"Colour?\n{OPTIONS}"}]}]
    async with await start_sim(SimConfig()) as sim:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=sim.url, max_retries=0)
        try:
            first = await client.messages.create(model="sim-model", max_tokens=5, messages=msgs)
            again = await client.messages.create(model="sim-model", max_tokens=5, messages=msgs,
                                                 stop_sequences=["A", "B", "C", "D"])
            with pytest.raises(anthropic.BadRequestError) as bad:  # API 2026-10-21: no sampling parameters
                await client.messages.create(model="sim-model", max_tokens=5, messages=msgs,
                                             extra_body={"temperature": 0})
        finally:
            await client.close()
        async with aiohttp.ClientSession() as http, http.post(  # max_tokens is required, as in the real API
                sim.url + "/v1/messages", json={"model": "m", "messages": msgs}) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["type"] == "invalid_request_error"
    assert first.type == "message" and first.role == "assistant" and first.id.startswith("msg_")
    assert first.content[0].type == "text" and first.stop_reason == "end_turn" and first.stop_sequence is None
    u1, u2 = first.usage, again.usage
    assert u1.cache_creation_input_tokens == 255 and u1.cache_read_input_tokens == 0
    assert u2.cache_read_input_tokens == 255 and u2.cache_creation_input_tokens == 0
    assert u1.input_tokens == u2.input_tokens == -(-len(f"Colour?\n{OPTIONS}") // 4)  # only what follows
    assert again.stop_reason == "stop_sequence" and again.stop_sequence in "ABCD" and again.content == []
    assert bad.value.body["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("fault, kind, status, error_type", [
    ("503", "transient", 529, "overloaded_error"),
    ("500", "transient", 500, "api_error"),
    ("429", "rate_limit", 429, "rate_limit_error"),
    ("400", "permanent", 400, "invalid_request_error"),
    ("drop", "transient", None, None),
])
async def test_errors_are_classified(fault, kind, status, error_type):
    faults = SimFaults(rate=1.0, kinds=(fault,), retry_after=0.05)
    async with await start_sim(SimConfig(faults=faults)) as sim:
        p = provider(sim.url)
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=sim.url, max_retries=0)
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete([user(1, "Colour?")], GenParams(), [png(1)])
            if status is not None:
                with pytest.raises(anthropic.APIStatusError) as raw:
                    await client.messages.create(model="sim-model", max_tokens=5,
                                                 messages=[{"role": "user", "content": "hi"}])
                assert raw.value.status_code == status and raw.value.body["type"] == "error"
                assert raw.value.body["error"]["type"] == error_type
        finally:
            await p.close()
            await client.close()
    e = info.value
    assert e.kind == kind and e.status == status and KEY not in e.message
    if fault == "503":
        assert "OverloadedError" in e.message
    if fault == "429":
        assert e.retry_after == pytest.approx(0.05)


async def test_thinking_block_becomes_reasoning():
    params = GenParams.with_extra({"thinking": {"type": "enabled", "budget_tokens": 1024}}, max_tokens=2048)
    async with await start_sim(SimConfig()) as sim:
        p = create_provider(parse_spec("anthropic/sim-model", [sim.url]), ENV)
        try:
            out = await p.complete([user(1, f"Colour?\n{OPTIONS}")], params, [png(3)])
        finally:
            await p.close()
    assert out.text in "ABCD" and out.reasoning


# ---- prompt caching --------------------------------------------------------------------------

@pytest.mark.parametrize("marker", [True, False])
async def test_ten_queries_on_one_image_read_the_cache_only_with_the_marker(marker):
    img = png(8, size=600)  # 2x2 tiles: 765 image tokens
    async with await start_sim(SimConfig()) as sim:
        p = provider(sim.url, cache_marker=marker)
        try:
            outs = await asyncio.gather(*(p.complete([user(1, f"Question {i}?\n{OPTIONS}")], GenParams(), [img])
                                          for i in range(10)))
        finally:
            await p.close()
    cached = [o.usage.cached_input_tokens for o in outs]
    if marker:
        assert sum(1 for c in cached if c == 765) >= 9
        assert all(o.usage.input_tokens > 765 for o in outs)  # the total includes the cached prefix
    else:
        assert cached == [0] * 10


def test_prompt_cache_reads_the_longest_prefix_and_expires_after_five_minutes():
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    assert cache.use((("sys", 100), ("img", 400))) == (0, 400)  # first sight: everything written
    assert cache.use((("sys", 100), ("img2", 500))) == (100, 400)  # shared system prefix read
    now[0] = 299.0
    assert cache.use((("sys", 100), ("img", 400))) == (400, 0)  # a hit refreshes the entry
    now[0] = 598.0
    assert cache.use((("img", 400),)) == (400, 0)
    now[0] = 899.0
    assert cache.use((("img", 400),)) == (0, 400)  # expired
    assert PromptCache(min_tokens=1024).use((("img", 400),)) == (0, 0)  # too short to cache


def test_run_reads_the_image_prefix_from_the_cache(tmp_path):
    folder = tmp_path / "ds"
    (folder / "images").mkdir(parents=True)
    draw_image(77, 300).save(folder / "images" / "same.png")
    rows = [{"id": f"s{i}", "image": "images/same.png", "question": f"Question {i}: which colour?",
             "options": {"A": "red", "B": "green", "C": "blue", "D": "white"}, "answer": "ABCD"[i % 4]}
            for i in range(10)]
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = run("mcq", "anthropic/sim-model", data=str(data), base_url=sim.url, env=ENV, no_cache=True,
                  out=str(tmp_path / "run"), progress=False)
    recs = read_records(tmp_path / "run")
    assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
    assert sum(1 for r in recs if r["usage"]["cached_input_tokens"] > 0) >= 9
