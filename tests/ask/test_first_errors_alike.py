"""A run whose first requests all fail with the same permanent error stops there (issue 44, item 15, second half).

A scripted server on 127.0.0.1 answers as LiteLLM's proxy does without its database when the key is wrong
(litellm 1.108.7, proxy/auth/user_api_key_auth.py): HTTP 400 with ProxyException's body,
{"error": {"message": "No connected db.", "type": "no_db_connection", "param": null, "code": "400"}}, to
every request alike. 0.3.0 sent every query of the run to it (24 of the sample's 24) and ended with exit 1,
"re-run to resume". Now: exit 2, one line naming the error, after ALIKE (3) requests when the model list
itself was refused (the first request then goes alone), or at most --concurrency + 2 when the list
answered; every request that ended is recorded. A run whose first request is answered is not stopped this
way: the answer is kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from aiohttp import web
from threaded_app import ThreadedApp

EVALKIT = Path(sys.executable).parent / "evalkit"
MODEL = "gpt-4o-mini"
NO_DB = {"error": {"message": "No connected db.", "type": "no_db_connection", "param": None, "code": "400"}}


class LiteLLMWithoutDb(ThreadedApp):
    """A proxy without its database on its own loop in a thread: every call is 400 "No connected db."
    (`models_ok`: its model list answers; `answer_first`: the first chat request gets a reply)."""

    def __init__(self, models_ok: bool = False, answer_first: bool = False) -> None:
        self.models_ok, self.answer_first = models_ok, answer_first
        self.chats = 0
        super().__init__()

    path = "/v1"

    async def _models(self, request: web.Request) -> web.Response:
        if self.models_ok:
            return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                                 "owned_by": "openai"}]})
        return web.json_response(NO_DB, status=400)

    async def _chat(self, request: web.Request) -> web.Response:
        await request.read()
        self.chats += 1
        if self.answer_first and self.chats == 1:
            return web.json_response({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})
        return web.json_response(NO_DB, status=400)

    def make_app(self) -> web.Application:
        app = web.Application()
        app.add_routes([web.get("/v1/models", self._models), web.post("/v1/chat/completions", self._chat)])
        return app


def _run(server: LiteLLMWithoutDb, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "LITELLM"))}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"), NO_PROXY="127.0.0.1",
               OPENAI_API_KEY="sk-a-wrong-key")
    done = subprocess.run([str(EVALKIT), "run", "mcq", "--model", f"openai-compatible/{MODEL}", "--base-url",
                           server.url, "--no-progress", "--out", str(tmp_path / "run"), *flags],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    errors = [line for line in done.stderr.splitlines() if line.startswith("evalkit: error:")]
    return done, errors


def _records(tmp_path: Path) -> list[dict]:
    path = tmp_path / "run" / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_a_refused_model_list_and_the_same_400_stop_after_three_requests(tmp_path) -> None:
    with LiteLLMWithoutDb() as server:
        done, errors = _run(server, tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    assert len(errors) == 1 and "No connected db." in errors[0], said[-3000:]
    assert "Traceback" not in said
    assert server.chats == 3, server.chats  # 0.3.0: all 24
    records = _records(tmp_path)  # every request that ended is recorded as it ended
    assert len(records) == 3 and {r["error"] for r in records} == {"permanent"}


def test_the_same_400_after_a_model_list_that_answered_stops_within_the_first_wave(tmp_path) -> None:
    with LiteLLMWithoutDb(models_ok=True) as server:
        done, errors = _run(server, tmp_path, "--concurrency", "4")
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    assert len(errors) == 1 and "No connected db." in errors[0], said[-3000:]
    assert server.chats <= 4 + 2, server.chats  # --concurrency + 2; 0.3.0: all 24
    records = _records(tmp_path)  # what came back is recorded as it ended
    assert len(records) == server.chats and {r["error"] for r in records} == {"permanent"}


def test_a_first_answer_ends_the_watch_and_is_kept(tmp_path) -> None:
    with LiteLLMWithoutDb(models_ok=True, answer_first=True) as server:
        done, errors = _run(server, tmp_path, "--concurrency", "1")
    said = done.stdout + done.stderr
    # answered once: the rest are asked (all 24, or 9+ if a busy machine lets the breaker's 8 s of quiet pass)
    assert server.chats >= 9, said[-3000:]
    assert done.returncode == 1 and errors == [], said[-3000:]
    answered = [r for r in _records(tmp_path) if r.get("error") is None]
    assert len(answered) == 1 and answered[0]["response"] == "A"
