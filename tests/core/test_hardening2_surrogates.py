"""A lone UTF-16 surrogate in a reply (`"A \\ud83d \\udfff end"`, valid JSON) is answered, cached and
recorded with U+FFFD in its place, and a records.jsonl line that spells one is read back.

Before, Python decoded the escape to a string that cannot be written as UTF-8: the cache's write
raised `UnicodeEncodeError: surrogates not allowed`, the run exited 1 with answers lost, and a
records line holding the escape (valid JSON, so never skipped as damaged) crashed `view` and
every resume. The reply is paid for and sound apart from half a character, so its text is kept.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from cli_under_test import run_main
from echo_provider import Echo, echo_queries
from synthetic_data import make_mcq_jsonl

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.store.cache import ResponseCache
from evalkit.core.errors import ProviderError
from evalkit.core.text.surrogates import repaired, repaired_json
from evalkit.core.types import Response, Usage
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers.anthropic.client import response_from_anthropic
from evalkit.providers.google.reply import response_from_gemini
from evalkit.providers.openai.format import response_from_openai
from evalkit.providers.wire.reply_json import json_object

LONE = "A \\ud83d \\udfff end"  # as the JSON text spells it
READ = "A \ufffd \ufffd end"  # what evalkit keeps
N = 6


class SurrogateServer:
    """An OpenAI-compatible server on 127.0.0.1 answering `content` (JSON text): two lone surrogates."""

    REPLY = ('{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":'
             '{"role":"assistant","content":"@"},"finish_reason":"stop"}],'
             '"usage":{"prompt_tokens":9,"completion_tokens":4}}')

    def __init__(self) -> None:
        self.content = LONE
        self.chats = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _start(self) -> None:
        from aiohttp import web

        async def models(_: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "x"}]})

        async def chat(request: web.Request) -> web.Response:
            await request.read()
            self.chats += 1
            return web.Response(text=self.REPLY.replace("@", self.content), content_type="application/json")

        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"  # type: ignore[union-attr]

    def __enter__(self) -> SurrogateServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture
def surrogate_run(tmp_path):
    """`evalkit run mcq` with vllm/m against the server; returns (run, server) once per call."""
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=3)
    with SurrogateServer() as server:
        def run(*command: str):  # noqa: ANN202
            args = list(command) or ["run", "mcq", "--model", "vllm/m", "--data", str(data)]
            if args[0] == "run":
                args += ["--base-url", server.url, "--out", str(tmp_path / "run"),
                         "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
            return run_main(args, env={"VLLM_API_KEY": "k"})
        yield run, server, tmp_path / "run"


def _no_traceback(proc) -> None:  # noqa: ANN001
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]


def test_a_lone_surrogate_in_a_vllm_reply_is_answered_recorded_and_cached(surrogate_run):
    run, server, out = surrogate_run
    first = run()
    _no_traceback(first)
    assert first.returncode == 0, first.stderr[-2000:]
    records = [json.loads(x) for x in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == N and {r["response"] for r in records} == {READ}
    assert all(r["parsed"] == "A" and r["error"] is None for r in records)
    assert server.chats == N
    again = run()  # every answer was cached: nothing is asked again
    assert again.returncode == 0 and server.chats == N, again.stderr[-2000:]


def test_a_records_line_spelling_a_lone_surrogate_is_read_by_report_view_and_resume(surrogate_run):
    run, server, out = surrogate_run
    server.content = "A"  # a sound run: the escape comes from an older records.jsonl
    assert run().returncode == 0
    path = out / "records.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    row["response"] = "A \ud83d \udfff end"
    row["error_message"] = "half \udfff"
    lines[0] = json.dumps(row)  # ensure_ascii: the line spells the escapes, as an older run wrote them
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    assert "\\ud83d" in path.read_text(encoding="utf-8")

    for command in (("report", str(out)), ("view", str(out)), ()):
        proc = run(*command)
        _no_traceback(proc)
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        assert "damaged" not in proc.stderr, proc.stderr  # the line is sound: read, not skipped
    assert server.chats == N  # the resume asked nothing again
    view = (out / "view").rglob("*.js")
    assert any(READ in p.read_text(encoding="utf-8") for p in view)


# ---- each provider's parsing -------------------------------------------------------------------

BODIES = {  # "@" stands for LONE
    "openai": (response_from_openai, '{"choices":[{"message":{"content":"@","reasoning_content":"t \\udfff"},'
                                     '"finish_reason":"stop"}],"model":"m \\ud800"}'),
    "anthropic": (response_from_anthropic, '{"content":[{"type":"thinking","thinking":"t \\udfff"},'
                                           '{"type":"text","text":"@"}],"stop_reason":"end_turn",'
                                           '"model":"m \\ud800"}'),
    "gemini": (response_from_gemini, '{"candidates":[{"content":{"parts":[{"text":"t \\udfff","thought":true},'
                                     '{"text":"@"}]},"finishReason":"STOP"}],"modelVersion":"m \\ud800"}'),
}


@pytest.mark.parametrize("provider", sorted(BODIES))
def test_every_provider_reads_a_lone_surrogate_as_the_replacement_character(provider):
    parse, body = BODIES[provider]
    response = parse(json_object(body.replace("@", LONE).encode("utf-8")))
    assert (response.text, response.reasoning, response.served_by) == (READ, "t \ufffd", "m \ufffd")
    json.dumps(response.to_cache(), ensure_ascii=False).encode("utf-8")  # writable as UTF-8


def test_a_surrogate_pair_still_reads_as_its_character():
    assert json_object(b'{"t":"\\ud83d\\ude00 ok"}') == {"t": "\U0001f600 ok"}


# ---- the runner: every answer, live or from a batch, and every error message ----------------------

class _Spoiled(Echo):
    """Hands back what a batch results file or an error body can hold: lone surrogates, unrepaired."""

    async def complete(self, messages, params, images):  # noqa: ANN001, ANN201
        self.sent += 1
        if "Question 1?" in messages[0].text():
            raise ProviderError("permanent", "HTTP 400: bad \ud83d request")
        return Response(text="A \ud83d", usage=Usage(10, 1), reasoning="r \udfff", served_by="m \ud800")


def test_the_runner_stores_whatever_a_provider_hands_back(tmp_path):
    provider, pipeline, cache = _Spoiled(), ImagePipeline(), ResponseCache(tmp_path / "cache")
    runner = Runner(provider, limiter=Limiter(concurrency=2), cache=cache, pipeline=pipeline,
                    policy=RetryPolicy(max_attempts=1))
    outcomes: list = []
    try:
        asyncio.run(runner.run(echo_queries(4), outcomes.append, workers=2))
        stored = cache.get_many([o.request_key for o in outcomes if o.response.ok])
    finally:
        cache.close()
        pipeline.close()
    by_id = {o.query.id: o.response for o in outcomes}
    assert by_id["q1"].error_message == "HTTP 400: bad \ufffd request"
    answered = [by_id[q] for q in ("q0", "q2", "q3")]
    assert {(r.text, r.reasoning, r.served_by) for r in answered} == {("A \ufffd", "r \ufffd", "m \ufffd")}
    assert len(stored) == 3  # all three were cached


def test_repair_reaches_keys_and_nested_values_and_keeps_sound_text():
    value = json.loads('{"k\\udfff": [{"x": ["\\ud83d"]}], "ok": "caf\\u00e9 \\ud83d\\ude00"}')
    assert repaired_json(value) == {"k\ufffd": [{"x": ["\ufffd"]}], "ok": "café \U0001f600"}
    sound = "café"
    assert repaired(sound) is sound
