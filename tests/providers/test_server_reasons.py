"""A server's refusal is shown with its own reason whole (up to ~300 characters), after a short lead-in
(issue 44, item 7).

Scripted servers on 127.0.0.1 stand in for Vertex AI (its token endpoint, the model lookup, and a
generateContent that answers a project the account may not use with 403 PERMISSION_DENIED) and for Bedrock
(a Converse route that answers 400 ValidationException). Each reason is ~280 characters, as Google's and
AWS's are; `evalkit run` stops on the first request with one line that holds it whole. A token endpoint
that refuses the service account's key is said as refused credentials, not as a server that "cannot be
reached".
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
PROJECT, LOCATION, GEMINI = "no-such-project-4711", "us-central1", "gemini-2.5-flash"
NOVA = "amazon.nova-lite-v1:0"
VERTEX_REASON = (f"Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/"
                 f"projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/{GEMINI}' (or it may not exist). "
                 "Check the project id and that the Vertex AI API is enabled for it: the-last-words-of-reason.")
BEDROCK_REASON = (f"Invocation of model ID {NOVA} with on-demand throughput isn't supported. Retry your request "
                  "with the ID or ARN of an inference profile that contains this model, such as us.amazon.nova-lite"
                  "-v1:0, or ask the account's administrator to enable cross-Region inference: the-final-words.")
GRANT_REASON = ("Invalid JWT Signature. The key that signed the assertion is not among the service account's "
                "keys: it was deleted or disabled; make a new key for the account and point "
                "GOOGLE_APPLICATION_CREDENTIALS at it: the-grant-reason-ends-here.")


class Scripted(ThreadedApp):
    """An aiohttp app on its own loop in a thread, on a free port of 127.0.0.1; the requests it got, by path."""

    def __init__(self, routes: list[web.RouteDef]) -> None:
        self.paths: list[str] = []
        self._routes = routes
        super().__init__()

    @web.middleware
    async def _count(self, request: web.Request, handler):
        self.paths.append(request.path)
        return await handler(request)

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._count])
        app.add_routes(self._routes)
        return app


def _evalkit(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE", "AWS", "GEMINI", "OPENAI"))}
    base.update(HOME=str(cwd / "home"), NO_PROXY="127.0.0.1", XDG_CACHE_HOME=str(cwd / "xdg"), **env)
    return subprocess.run([str(EVALKIT), *args], cwd=cwd, env=base, capture_output=True, text=True, timeout=300)


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    """The run's one error line, its whitespace as one space each."""
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("evalkit: error:")]
    assert len(lines) == 1, said[-3000:]
    assert "Traceback" not in said
    return " ".join(lines[0].split())


def _key_file(path: Path, token_uri: str) -> Path:
    """A service account's key file with a fresh RSA key (never a real one), its token_uri at the scripted server."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path.write_text(json.dumps({
        "type": "service_account", "project_id": PROJECT, "private_key_id": "0" * 40, "private_key": pem,
        "client_email": "reasons@test-project.iam.gserviceaccount.com", "client_id": "1",
        "token_uri": token_uri}))
    return path


def _vertex_routes(token_refused: bool) -> list[web.RouteDef]:
    async def token(request: web.Request) -> web.Response:
        await request.post()
        if token_refused:
            return web.json_response({"error": "invalid_grant", "error_description": GRANT_REASON}, status=400)
        return web.json_response({"access_token": "ya29.scripted", "expires_in": 3599, "token_type": "Bearer"})

    async def lookup(request: web.Request) -> web.Response:  # the publisher model exists: no project in this call
        return web.json_response({"name": f"publishers/google/models/{GEMINI}", "launchStage": "GA"})

    async def generate(request: web.Request) -> web.Response:
        return web.json_response({"error": {"code": 403, "message": VERTEX_REASON, "status": "PERMISSION_DENIED"}},
                                 status=403)

    return [web.post("/token", token), web.get("/v1/publishers/google/models/{model}", lookup),
            web.post("/{version}/projects/{project}/locations/{location}/publishers/google/models/{call}", generate)]


def _vertex_env(server: Scripted, tmp_path: Path) -> dict[str, str]:
    key = _key_file(tmp_path / "sa.json", server.url + "/token")
    return {"GOOGLE_APPLICATION_CREDENTIALS": str(key), "GOOGLE_CLOUD_PROJECT": PROJECT,
            "GOOGLE_CLOUD_LOCATION": LOCATION}


def test_vertex_wrong_project_keeps_googles_reason_whole(tmp_path) -> None:
    assert 250 <= len(VERTEX_REASON) <= 300
    with Scripted(_vertex_routes(token_refused=False)) as server:
        done = _evalkit(["run", "mcq", "--model", f"vertex/{GEMINI}", "--base-url", server.url, "--limit", "4"],
                        _vertex_env(server, tmp_path), tmp_path)
    line = _one_error_line(done)
    assert VERTEX_REASON in line, line
    assert not line.endswith(": )"), line
    asked = [p for p in server.paths if p.endswith(":generateContent")]
    assert len(asked) == 1, server.paths  # the first request stops the run


def test_a_refused_vertex_credential_is_said_refused(tmp_path) -> None:
    with Scripted(_vertex_routes(token_refused=True)) as server:
        done = _evalkit(["run", "mcq", "--model", f"vertex/{GEMINI}", "--base-url", server.url, "--limit", "4"],
                        _vertex_env(server, tmp_path), tmp_path)
    line = _one_error_line(done)
    assert "cannot be reached" not in line, line
    assert "credentials were refused" in line, line
    assert GRANT_REASON in line, line
    assert not [p for p in server.paths if "/projects/" in p], server.paths  # nothing asked of the model


def _bedrock(reason: str, tmp_path: Path) -> str:
    """The error line of a Bedrock run whose Converse route answers 400 ValidationException with `reason`."""
    async def converse(request: web.Request) -> web.Response:
        return web.json_response({"message": reason}, status=400,
                                 headers={"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/"})

    with Scripted([web.post("/model/{model_id}/converse", converse)]) as server:
        env = {"AWS_ACCESS_KEY_ID": "AKIAREASONSTEST00001", "AWS_SECRET_ACCESS_KEY": "reasons/test/secret/key/0001",
               "AWS_REGION": "us-east-1"}
        done = _evalkit(["run", "mcq", "--model", f"bedrock/{NOVA}", "--base-url", server.url, "--limit", "4"],
                        env, tmp_path)
    assert len([p for p in server.paths if p.endswith("/converse")]) == 1, server.paths  # the first stops the run
    return _one_error_line(done)


def test_bedrock_keeps_its_reason_whole(tmp_path) -> None:
    assert 250 <= len(BEDROCK_REASON) <= 300
    line = _bedrock(BEDROCK_REASON, tmp_path)
    assert BEDROCK_REASON in line, line


def test_a_reason_over_300_characters_keeps_300_and_ends_at_a_word(tmp_path) -> None:
    words = [f"word{i:03d}" for i in range(80)]  # 639 characters, every word 7 long
    reason = f"Invocation of model ID {NOVA} is not supported: " + " ".join(words)
    line = _bedrock(reason, tmp_path)
    kept = line.partition("Invocation of model ID")[2]
    last = kept.partition("…")[0].split()[-1]
    assert last in words, line  # cut after a whole word, never inside one
    shown = len("Invocation of model ID") + len(kept.partition("…")[0])
    assert 280 <= shown <= 300, (shown, line)
    assert len(line) < 600, line
