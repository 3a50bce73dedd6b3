"""The simulated server: wire format (OpenAI SDK and plain aiohttp), answer key, model, faults, limits."""

from __future__ import annotations

import argparse
import json
import math

import aiohttp
import openai
import pytest
from sim_helpers import (
    MCQ_TEXT,
    OPTIONS,
    PROMPTS,
    body,
    fp_of,
    make_png,
    post,
    query,
    shrink_to_jpeg,
    user_message,
)

from evalkit.core.fingerprint import fingerprint_bytes
from evalkit.sim import (
    AnswerEntry,
    AnswerKey,
    SimConfig,
    SimModel,
    SimParams,
    SimThread,
    add_sim_arguments,
    build_answer_key,
    config_from_args,
    judge_answer,
    start_sim,
)


@pytest.fixture
def two_image_key() -> tuple[AnswerKey, bytes, bytes]:
    """Same question text on two pictures, with different gold answers."""
    circle, tri = make_png("circle"), make_png("triangle")
    key = build_answer_key(
        [query("q1", "b1", MCQ_TEXT, "A", OPTIONS, circle), query("q2", "b2", MCQ_TEXT, "C", OPTIONS, tri)], fp_of
    )
    return key, circle, tri


# -- wire format ----------------------------------------------------------------------------


async def test_openai_sdk_round_trip_with_usage(two_image_key):
    key, circle, tri = two_image_key
    server = await start_sim(SimConfig(answer_key=key))
    try:
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        out = await client.chat.completions.create(
            model="sim-model",
            messages=[user_message(MCQ_TEXT, tri)],
            temperature=0,
            max_tokens=16,
            seed=1,
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        assert out.choices[0].message.content == "C"
        assert out.choices[0].finish_reason == "stop"
        assert out.object == "chat.completion" and out.model == "sim-model"
        assert out.usage.prompt_tokens == math.ceil(len(MCQ_TEXT) / 4) + 85 + 170
        assert out.usage.completion_tokens == 2
        assert out.usage.total_tokens == out.usage.prompt_tokens + 2
        models = await client.models.list()
        assert [m.id for m in models.data] == ["sim-model"]
        await client.close()
    finally:
        await server.close()


async def test_aiohttp_round_trip_and_sim_endpoints(two_image_key):
    key, circle, _ = two_image_key
    server = await start_sim(SimConfig(answer_key=key, served_model_name="my-vlm"))
    try:
        async with aiohttp.ClientSession() as s:
            status, _, data = await post(s, server.url, body(MCQ_TEXT, circle, model="whatever"))
            assert status == 200
            assert data["choices"][0] == {
                "index": 0,
                "message": {"role": "assistant", "content": "A"},
                "finish_reason": "stop",
                "logprobs": None,
            }
            assert set(data) >= {"id", "object", "created", "model", "choices", "usage"}
            async with s.get(server.url + "/v1/models") as r:
                listed = await r.json()
            assert listed["object"] == "list"
            assert listed["data"][0]["id"] == "my-vlm" and listed["data"][0]["owned_by"] == "evalkit-sim"
            async with s.get(server.url + "/sim/counters") as r:
                counts = await r.json()
            assert counts["requests"] == 1 and counts["completions"] == 1
            async with s.post(server.url + "/sim/reset") as r:
                assert r.status == 200
            assert server.counters.snapshot()["requests"] == 0
    finally:
        await server.close()


async def test_invalid_bodies_strict_model_and_guided_choice():
    server = await start_sim(SimConfig(served_model_name="served", strict_model=True))
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(server.url + "/v1/chat/completions", data=b"{not json") as r:
                assert r.status == 400
                assert set((await r.json())["error"]) >= {"message", "type", "code"}
            for bad in ({"model": "served"}, {"model": "served", "messages": "hi"}, [1, 2],
                        {"model": "served", "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
                        {"model": "served", "messages": [user_message("x")], "max_tokens": -1},
                        {"model": "served", "messages": [user_message("x", b"not an image")]},
                        {"model": "served", "messages": [{"role": "user", "content": [
                            {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}]}]}):
                status, _, data = await post(s, server.url, bad)
                assert status == 400 and "message" in data["error"]
            status, _, data = await post(s, server.url, body("Q?\nA. x\nB. y", model="other"))
            assert status == 404
            status, _, data = await post(s, server.url, body(MCQ_TEXT, model="served", guided_choice=["B", "D"]))
            assert status == 200 and data["choices"][0]["message"]["content"] in ("B", "D")
            status, _, data = await post(s, server.url, body(MCQ_TEXT, model="served", max_tokens=1, stop=["x"]))
            assert status == 200 and data["choices"][0]["message"]["content"] in "ABCD"
            assert server.counters["bad_requests"] == 9
    finally:
        await server.close()


# -- answer key ------------------------------------------------------------------------------


async def test_lookup_tells_images_apart_after_resize_and_jpeg(two_image_key):
    key, circle, tri = two_image_key
    server = await start_sim(SimConfig(answer_key=key))
    try:
        async with aiohttp.ClientSession() as s:
            for img, gold in ((shrink_to_jpeg(circle), "A"), (shrink_to_jpeg(tri), "C")):
                payload = {"model": "m", "messages": [user_message(MCQ_TEXT, img, mime="image/jpeg")]}
                status, _, data = await post(s, server.url, payload)
                assert status == 200 and data["choices"][0]["message"]["content"] == gold
    finally:
        await server.close()


def test_answer_key_save_load_and_whitespace(tmp_path, two_image_key):
    key, circle, tri = two_image_key
    path = tmp_path / "key.json"
    key.save(path)
    assert json.loads(path.read_text())["format"] == "evalkit-answer-key/1"
    loaded = AnswerKey.load(path)
    assert [e.to_dict() for e in loaded.entries] == [e.to_dict() for e in key.entries]
    messy = MCQ_TEXT.replace("\n", "  \n ") + "  "
    hit = loaded.lookup(messy, [fingerprint_bytes(shrink_to_jpeg(tri))])
    assert hit is not None and hit.answer == "C"
    assert loaded.lookup(MCQ_TEXT, []) is None  # image count must match
    assert loaded.lookup("another question", [fingerprint_bytes(tri)]) is None
    with pytest.raises(ValueError):
        AnswerKey.from_json({"format": "something-else", "entries": []})


# -- the simulated model ---------------------------------------------------------------------


def test_theta_r_g_statistics():
    fp = "00" * 256
    entries = [
        AnswerEntry(f"base{i}", f"Question {i}?\nA. a\nB. b\nC. c\nD. d", [fp], "ABCD"[i % 4], dict.fromkeys("ABCD", "x"))
        for i in range(2000)
    ]
    key = AnswerKey(entries)
    model = SimModel(SimParams(theta=0.7, r=0.95, g=0.25, seed=3), key)
    replies = [model.reply(e.text, e.images) for e in entries]
    acc = sum(r.content == e.answer for r, e in zip(replies, entries, strict=True)) / len(entries)
    assert abs(acc - (0.7 * 0.95 + 0.3 * 0.25)) < 0.04
    known = sum(model.knows(e.base_id) for e in entries) / len(entries)
    assert abs(known - 0.7) < 0.04
    assert all(r.content in "ABCD" for r in replies)
    # deterministic: a second model with the same seed says the same thing
    again = SimModel(SimParams(theta=0.7, r=0.95, g=0.25, seed=3), key)
    assert [again.reply(e.text, e.images).content for e in entries[:50]] == [r.content for r in replies[:50]]


def test_yes_no_wrong_answer_is_the_other_word():
    entries = [AnswerEntry(f"b{i}", f"Is there a cat {i}?", [], "Yes" if i % 2 else "No") for i in range(200)]
    model = SimModel(SimParams(theta=0.0, r=1.0, g=0.0), AnswerKey(entries))
    for e in entries:
        assert model.reply(e.text, []).content == ("No" if e.answer == "Yes" else "Yes")


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("letter", "C"),
        ("sentence", "The answer is (C)."),
        ("refusal", "I'm sorry, but I can't help with identifying that."),
        ("first", "A"),
        ("yes", "Yes"),
    ],
)
def test_styles(style, expected):
    entry = AnswerEntry("b", MCQ_TEXT, [], "C", OPTIONS)
    assert SimModel(SimParams(style=style), AnswerKey([entry])).reply(MCQ_TEXT, []).content == expected


def test_verbose_and_mixed_styles_name_the_choice_once():
    entry = AnswerEntry("b", MCQ_TEXT, [], "C", OPTIONS)
    text = SimModel(SimParams(style="verbose"), AnswerKey([entry])).reply(MCQ_TEXT, []).content
    assert "option C, triangle" in text and len(text.split(". ")) >= 2
    assert judge_answer("mcq", f"Options:\nA. circle\nC. triangle\nAnswer: {text}\nYour reply:") == "C"
    seen = set()
    for i in range(60):
        q = MCQ_TEXT.replace("shape", f"shape {i}")
        seen.add(SimModel(SimParams(style="mixed"), AnswerKey([AnswerEntry("b", q, [], "B", OPTIONS)])).reply(q, []).content[:4])
    assert seen == {"B", "The ", "Look", "I'd "}
    ordinal = SimModel(SimParams(style="ordinal"), AnswerKey([entry])).reply(MCQ_TEXT, []).content
    assert "C" not in ordinal and judge_answer("mcq", f"Q?\nOptions:\nA. circle\nB. square\nC. triangle\n"
                                                      f"Answer: {ordinal}\nYour reply:") == "C"


def test_prompt_without_entry_answers_a_shown_letter():
    model = SimModel(SimParams(), None)
    reply = model.reply("Pick one:\n(B) red\n(C) blue\n(D) green", [])
    assert reply.content in {"B", "C", "D"} and reply.source == "unknown"
    assert model.reply("Options: {'E': 'x', 'F': 'y'}", []).content in {"E", "F"}
    assert model.reply("Describe the picture.", []).content == "A"


async def test_judge_prompts_are_answered(two_image_key):
    mcq = (PROMPTS / "mcq.txt").read_text()
    yesno = (PROMPTS / "yesno.txt").read_text()
    cases = [
        (mcq.format(question="What shape?", options="A. circle\nB. square\nC. triangle", response="I think (B) fits."), "B"),
        (mcq.format(question="What shape?", options="A. circle\nB. square\nC. triangle",
                    response="It is clearly a triangle."), "C"),
        (mcq.format(question="What shape?", options="A. circle\nB. square", response="No idea."), "Z"),
        (yesno.format(question="Is it red?", response="Yes, it is red."), "Yes"),
        (yesno.format(question="Is it red?", response="no, definitely not"), "No"),
        (yesno.format(question="Is it red?", response="Hard to say."), "Unknown"),
    ]
    key, _, _ = two_image_key
    server = await start_sim(SimConfig(answer_key=key, params=SimParams(style="verbose")))
    try:
        async with aiohttp.ClientSession() as s:
            for prompt, expected in cases:
                status, _, data = await post(s, server.url, body(prompt))
                assert status == 200 and data["choices"][0]["message"]["content"] == expected, prompt
    finally:
        await server.close()


async def test_replay_returns_recorded_text(tmp_path):
    tri = make_png("triangle")
    records = tmp_path / "records.jsonl"
    lines = [
        {"prompt": MCQ_TEXT, "image_fps": [fingerprint_bytes(tri)], "response": "Well... (C), I guess", "base_id": "b1", "gold": "C"},
        {"prompt": "Other?", "image_fps": [], "response": None, "error": "transient", "base_id": "b2", "gold": "A"},
    ]
    records.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    key = AnswerKey.from_records(records)
    assert len(key) == 1 and key.entries[0].reply == "Well... (C), I guess"
    server = await start_sim(SimConfig(answer_key=key))
    try:
        async with aiohttp.ClientSession() as s:
            status, _, data = await post(s, server.url, body(MCQ_TEXT, shrink_to_jpeg(tri)))
            assert data["choices"][0]["message"]["content"] == "Well... (C), I guess"
    finally:
        await server.close()



def test_sim_thread_for_synchronous_callers(two_image_key):
    key, circle, _ = two_image_key
    with SimThread(SimConfig(answer_key=key)) as sim:
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="x", max_retries=0)
        out = client.chat.completions.create(model="m", messages=[user_message(MCQ_TEXT, circle)])
        assert out.choices[0].message.content == "A"
        assert sim.counters.snapshot()["completions"] == 1 and sim.counters["requests"] == 1
        client.close()


def test_config_from_args(tmp_path, two_image_key):
    key, _, _ = two_image_key
    key.save(tmp_path / "k.json")
    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    args = parser.parse_args(
        ["--answer-key", str(tmp_path / "k.json"), "--theta", "0.5", "--style", "mixed", "--latency-ms", "20",
         "--rps", "5", "--fault-rate", "0.1", "--fault-kinds", "429,drop", "--served-model-name", "x"]
    )
    cfg = config_from_args(args)
    assert cfg.answer_key is not None and len(cfg.answer_key) == 2
    assert cfg.params.theta == 0.5 and cfg.params.style == "mixed" and cfg.latency_s == pytest.approx(0.02)
    assert cfg.faults.kinds == ("429", "drop") and cfg.faults.rps == 5 and cfg.served_model_name == "x"
    with pytest.raises(ValueError):
        config_from_args(parser.parse_args(["--fault-rate", "0.1", "--fault-kinds", "boom"]))


async def test_the_reply_gate_holds_replies_until_released():
    """hold(after=2): two replies go, the rest wait (counted as requests and as held) until release();
    a server shutdown releases whatever is still held instead of waiting for a release."""
    import asyncio

    sim = await start_sim(SimConfig())
    async with aiohttp.ClientSession() as session:
        sim.gate.hold(after=2)
        asks = [asyncio.create_task(post(session, sim.url, body(f"question {i}"))) for i in range(5)]
        while sum(t.done() for t in asks) < 2 or sim.gate.held < 3:
            await asyncio.sleep(0.01)
        assert sim.counters["requests"] == 5 and sim.counters["completions"] == 2
        assert sum(t.done() for t in asks) == 2
        sim.gate.release()
        assert [status for status, _, _ in await asyncio.gather(*asks)] == [200] * 5
        assert sim.gate.held == 0 and sim.counters["completions"] == 5
        sim.gate.hold()
        late = asyncio.create_task(post(session, sim.url, body("late")))
        while sim.gate.held < 1:
            await asyncio.sleep(0.01)
        await asyncio.wait_for(sim.close(), 30)
        await asyncio.wait_for(asyncio.gather(late, return_exceptions=True), 30)
        assert sim.gate.held == 0


def test_the_reply_gate_from_another_thread():
    with SimThread(SimConfig()) as sim:
        sim.hold(after=1)
        assert sim.held == 0
        sim.release()
        assert sim.held == 0


async def test_a_reply_the_client_gave_up_on_is_counted_abandoned():
    """A completion sent after its client timed out was never delivered: counted apart, so a test can
    tell a client's re-ask from a duplicate answer."""
    import asyncio

    async with await start_sim(SimConfig()) as sim, aiohttp.ClientSession() as session:
        sim.gate.hold()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(post(session, sim.url, body("slow")), 0.5)
        while sim.gate.held:  # the client is gone; the held request is still waiting
            sim.gate.release()
            await asyncio.sleep(0.01)
        while sim.counters["in_flight"]:
            await asyncio.sleep(0.01)
        status, _, _ = await post(session, sim.url, body("fast"))
        assert status == 200
        assert sim.counters["completions"] == 2 and sim.counters["abandoned"] == 1
