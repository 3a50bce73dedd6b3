"""The simulator's Vertex AI dialect: its token endpoint checks a service account's signed assertion, its routes
want the token it issued and answer in Vertex's shapes (401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 429
RESOURCE_EXHAUSTED, 404 for an unknown publisher model), rawPredict wants Vertex's anthropic_version; and
the provider's redactor and preflight verdicts (pure)."""

from __future__ import annotations

import json
import time

import aiohttp
import pytest
from vertex_account import fake_account

from evalkit.providers.base import ProviderSpec
from evalkit.providers.vertex.auth import default_root, locate, place_of
from evalkit.providers.vertex.client import VertexRedactor
from evalkit.providers.vertex.preflight import judge, model_url
from evalkit.sim.machinery.accounts import GOOGLE_TOKEN_URI, BadAssertion, verify_assertion
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, start_sim

ACCOUNT = fake_account()
DENIED = fake_account("no-role", allowed=False)
PLACE = "/v1/projects/p1/locations/us-central1/publishers"
GEMINI = f"{PLACE}/google/models/gemini-2.5-flash:generateContent"
CLAUDE = f"{PLACE}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
CONTENTS = {"contents": [{"role": "user", "parts": [{"text": "Which shape?\nA. circle\nB. square"}]}]}
MESSAGES = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 16,
            "messages": [{"role": "user", "content": "Which shape?\nA. circle\nB. square"}]}


def assertion(account, audience: str = GOOGLE_TOKEN_URI, **claims) -> str:
    """A JWT-bearer assertion as google-auth signs one."""
    from google.auth import crypt, jwt

    now = int(time.time())
    payload = {"iss": account.email, "scope": "https://www.googleapis.com/auth/cloud-platform", "aud": audience,
               "iat": now, "exp": now + 3600, **claims}
    signer = crypt.RSASigner.from_string(account.private_pem, account.key_id)
    return jwt.encode(signer, payload).decode()


@pytest.fixture
async def sim():
    config = SimConfig(google_accounts=(ACCOUNT.public, DENIED.public), strict_model=True,
                       served_model_name="gemini-2.5-flash")
    async with await start_sim(config) as server:
        yield server


async def token_for(session, url: str, account) -> tuple[int, dict]:
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion(account)}
    async with session.post(url + "/token", data=form) as resp:
        return resp.status, await resp.json()


async def post(session, url: str, body: dict, token: str | None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.post(url, json=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_the_token_endpoint_signs_in_a_known_account_and_refuses_a_foreign_key(sim):
    async with aiohttp.ClientSession() as s:
        status, body = await token_for(s, sim.url, ACCOUNT)
        assert status == 200 and body["token_type"] == "Bearer" and body["access_token"].startswith("ya29.")
        assert body["expires_in"] == 3599
        status, body = await token_for(s, sim.url, fake_account("stranger"))
        assert status == 400 and body["error"] == "invalid_grant"
        async with s.post(sim.url + "/token", data={"grant_type": "password", "assertion": "x"}) as resp:
            assert resp.status == 400 and (await resp.json())["error"] == "unsupported_grant_type"


def test_an_assertion_signed_by_another_key_or_too_long_lived_is_refused():
    forged = fake_account(ACCOUNT.email.partition("@")[0])  # the same e-mail, another key
    with pytest.raises(BadAssertion, match="Signature"):
        verify_assertion(assertion(forged), (ACCOUNT.public,), "http://x/token")
    now = int(time.time())
    with pytest.raises(BadAssertion, match="short-lived"):
        verify_assertion(assertion(ACCOUNT, exp=now + 7200), (ACCOUNT.public,), "http://x/token")
    with pytest.raises(BadAssertion, match="aud"):
        verify_assertion(assertion(ACCOUNT, audience="https://elsewhere/token"), (ACCOUNT.public,), "http://x/token")
    assert verify_assertion(assertion(ACCOUNT), (ACCOUNT.public,), "http://x/token") == ACCOUNT.public


async def test_model_routes_want_an_issued_token_and_answer_in_vertex_shapes(sim):
    async with aiohttp.ClientSession() as s:
        token = (await token_for(s, sim.url, ACCOUNT))[1]["access_token"]
        for bad in (None, "ya29.not-issued-by-this-server"):
            status, body = await post(s, sim.url + GEMINI, CONTENTS, bad)
            assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED"
        status, body = await post(s, sim.url + GEMINI, CONTENTS, token)
        assert status == 200 and body["candidates"][0]["content"]["parts"][0]["text"]
        status, body = await post(s, sim.url + GEMINI.replace("/v1/", "/v1beta1/"), CONTENTS, token)
        assert status == 200
        denied = (await token_for(s, sim.url, DENIED))[1]["access_token"]
        status, body = await post(s, sim.url + GEMINI, CONTENTS, denied)
        assert status == 403 and body["error"]["status"] == "PERMISSION_DENIED"
        assert "aiplatform.endpoints.predict" in body["error"]["message"]
        status, body = await post(s, sim.url + GEMINI.replace("gemini-2.5-flash", "gemini-9"), CONTENTS, token)
        assert status == 404 and body["error"]["status"] == "NOT_FOUND"
        assert "publishers/google/models/gemini-9" in body["error"]["message"]
        async with s.get(sim.url + "/v1/publishers/google/models/gemini-2.5-flash",
                         headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 200 and (await resp.json())["name"] == "publishers/google/models/gemini-2.5-flash"
        async with s.get(sim.url + "/v1/publishers/google/models/gemini-9",
                         headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 404
    assert sim.counters.snapshot()["completions"] == 2


async def test_raw_predict_wants_vertex_anthropic_version_and_the_model_in_the_path():
    config = SimConfig(google_accounts=(ACCOUNT.public,), faults=SimFaults(rate=1.0, kinds=("429",)))
    async with await start_sim(SimConfig(google_accounts=(ACCOUNT.public,))) as sim, \
            await start_sim(config) as limited, aiohttp.ClientSession() as s:
        token = (await token_for(s, sim.url, ACCOUNT))[1]["access_token"]
        status, body = await post(s, sim.url + CLAUDE, MESSAGES, token)
        assert status == 200 and body["type"] == "message" and body["content"][0]["type"] == "text"
        assert body["model"] == "claude-sonnet-4-5@20250929"
        status, body = await post(s, sim.url + CLAUDE, {**MESSAGES, "anthropic_version": "2023-06-01"}, token)
        assert status == 400 and "vertex-2023-10-16" in body["error"]["message"]
        status, body = await post(s, sim.url + CLAUDE, {**MESSAGES, "model": "claude-x"}, token)
        assert status == 400 and "model" in body["error"]["message"]
        other = (await token_for(s, limited.url, ACCOUNT))[1]["access_token"]
        status, body = await post(s, limited.url + CLAUDE, MESSAGES, other)
        assert status == 429 and body["error"]["status"] == "RESOURCE_EXHAUSTED"


def test_the_spec_names_project_and_location_and_the_preflight_reads_vertex_verdicts():
    env = {"GOOGLE_CLOUD_PROJECT": "my-proj", "GOOGLE_CLOUD_LOCATION": "europe-west4"}
    (url,) = locate((), env)
    assert url == "https://europe-west4-aiplatform.googleapis.com/projects/my-proj/locations/europe-west4"
    assert place_of(url).project == "my-proj" and default_root("global") == "https://aiplatform.googleapis.com"
    assert locate((url + "/",), {}) == (url,)  # an endpoint as config.json records it is kept, nothing else needed
    spec = ProviderSpec("vertex", "claude-haiku-4-5@20251001", (url,))
    assert model_url(spec, url) == ("https://europe-west4-aiplatform.googleapis.com/v1/publishers/anthropic/models/"
                                    "claude-haiku-4-5@20251001")
    assert judge(200, {}, spec, "my-proj") is None and judge(500, None, spec, "my-proj") is None
    assert "roles/aiplatform.user" in judge(403, {"error": {"message": "denied"}}, spec, "my-proj")
    missing = {"error": {"message": "Publisher Model `publishers/anthropic/models/claude-haiku-4-5@20251001` not found."}}
    assert "unknown model" in judge(404, missing, spec, "my-proj")
    assert judge(404, None, spec, "my-proj") is None  # a proxy without the lookup: the first requests tell


def test_the_redactor_masks_tokens_bearer_values_private_keys_and_key_ids():
    class Creds:
        token = "ya29.current-token-value"
        private_key_id = ACCOUNT.key_id

    redact = VertexRedactor([], Creds())
    text = json.dumps({"private_key_id": ACCOUNT.key_id, "private_key": ACCOUNT.private_pem,
                       "echo": "Authorization: Bearer abc.def-ghi, old ya29.a0AfB_older-token"})
    out = redact(text + " " + Creds.token)
    assert ACCOUNT.key_id not in out and "PRIVATE KEY" not in out and "ya29." not in out
    assert "abc.def-ghi" not in out and ACCOUNT.private_pem.splitlines()[1] not in out
    assert redact("B. the bearer of the flag") == "B. the bearer of the flag"  # an answer's words are kept


async def test_with_think_tokens_both_vertex_routes_think_as_their_vendors():
    async with await start_sim(SimConfig(google_accounts=(ACCOUNT.public,), think_tokens=40)) as sim, \
            aiohttp.ClientSession() as s:
        token = (await token_for(s, sim.url, ACCOUNT))[1]["access_token"]
        thinking = {"type": "enabled", "budget_tokens": 1024}
        status, body = await post(s, sim.url + CLAUDE, {**MESSAGES, "max_tokens": 2048, "thinking": thinking}, token)
        assert status == 200 and body["content"][0]["type"] == "thinking" and body["usage"]["output_tokens"] > 20
        config = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}, "maxOutputTokens": 2048}}
        status, body = await post(s, sim.url + GEMINI, {**CONTENTS, **config}, token)
        assert status == 200 and body["usageMetadata"]["thoughtsTokenCount"] >= 20


def test_an_export_names_the_vendor_as_the_developer_of_a_model_on_vertex(tmp_path):
    from evalkit.export.runs import ExportRun
    from evalkit.export.to_eee import model_info

    def info(spec: str) -> dict:
        return model_info(ExportRun(tmp_path, {"model": spec, "config": {"endpoint": "E"}}, {}, []))

    assert info("vertex/claude-sonnet-4-5@20250929")["developer"] == "Anthropic"
    gemini = info("vertex/gemini-2.5-flash")
    assert gemini["developer"] == "Google" and gemini["inference_platform"] == "vertex"


def test_a_users_gcloud_credentials_load_and_their_refresh_token_is_masked(tmp_path):
    from evalkit.providers.vertex.auth import load_credentials

    path = tmp_path / "adc.json"
    path.write_text(json.dumps({"type": "authorized_user", "client_id": "764086051850-x.apps.googleusercontent.com",
                                "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty", "refresh_token": "1//0gRefreshCanary"}))
    creds = load_credentials({"GOOGLE_APPLICATION_CREDENTIALS": str(path)}, "vertex/gemini-2.5-flash")
    out = VertexRedactor([], creds)("invalid_grant for 1//0gRefreshCanary (client d-FL95Q19q7MQmFpd7hHD0Ty)")
    assert "1//0gRefreshCanary" not in out and "d-FL95Q19q7MQmFpd7hHD0Ty" not in out
