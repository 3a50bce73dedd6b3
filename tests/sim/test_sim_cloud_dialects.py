"""The simulator's Azure OpenAI and OpenRouter dialects: their routes, credentials, reply fields and
errors as the real services send them, the real openai SDK against them, and the log of what the
simulator heard (never a credential's value)."""

from __future__ import annotations

import argparse
import json
import time

import aiohttp
import openai
import pytest
from hostile_routes import HostileRoutes

from evalkit.sim.args import add_sim_arguments, config_from_args
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, start_sim

KEY = "sk-sim/Cloud+Key9="
TOKEN = "entra.header.payload.signature"
DEPLOYMENT = "my-gpt4o-deployment"
VERSION = "2024-10-21"
CLASSIC = f"/openai/deployments/{DEPLOYMENT}/chat/completions"
MESSAGES = [{"role": "user", "content": "Which shape?\nA. circle\nB. square\nAnswer with the letter."}]


def chat(model: str | None = None, **extra) -> dict:
    return {**({"model": model} if model is not None else {}), "messages": MESSAGES, **extra}


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
async def sim():
    async with await start_sim(SimConfig(api_key=KEY, entra_token=TOKEN), routes=HostileRoutes()) as server:
        yield server


async def call(session, method: str, url: str, payload=None, headers=None) -> tuple[int, dict, dict]:
    async with session.request(method, url, json=payload, headers=headers or {}) as resp:
        text = await resp.text()
        return resp.status, dict(resp.headers), json.loads(text) if text else {}


AZ = {"api-key": KEY}
OR = {"Authorization": f"Bearer {KEY}"}


# ---- Azure OpenAI ---------------------------------------------------------------------------------

async def test_classic_route_needs_api_version_and_answers_as_the_deployment(sim, session):
    status, _, reply = await call(session, "POST", f"{sim.url}{CLASSIC}?api-version={VERSION}",
                                  chat("gpt-something-else"), AZ)
    assert status == 200
    assert reply["model"] == DEPLOYMENT and reply["object"] == "chat.completion"
    assert isinstance(reply["choices"][0]["message"]["content"], str) and reply["choices"][0]["message"]["content"]
    prompt = reply["prompt_filter_results"][0]
    assert prompt["prompt_index"] == 0 and prompt["content_filter_results"]["violence"] == {
        "filtered": False, "severity": "safe"}
    assert reply["choices"][0]["content_filter_results"]["hate"]["filtered"] is False
    status, _, reply = await call(session, "POST", f"{sim.url}{CLASSIC}?api-version={VERSION}", chat(), AZ)
    assert status == 200 and reply["model"] == DEPLOYMENT  # no model in the body at all
    status, _, reply = await call(session, "POST", sim.url + CLASSIC, chat(DEPLOYMENT), AZ)
    assert status == 404 and reply == {"error": {"code": "404", "message": "Resource not found"}}
    assert sim.counters.snapshot()["completions"] == 2


async def test_azure_credentials_api_key_or_entra_token_only(sim, session):
    url = f"{sim.url}{CLASSIC}?api-version={VERSION}"
    for headers in ({"api-key": KEY}, {"Authorization": f"Bearer {TOKEN}"}):
        assert (await call(session, "POST", url, chat(), headers))[0] == 200
    for headers in ({}, {"Authorization": f"Bearer {KEY}"}, {"api-key": "wrong"}, {"x-api-key": KEY},
                    {"Authorization": "Bearer wrong"}):
        status, _, reply = await call(session, "POST", url, chat(), headers)
        assert status == 401 and reply["error"]["code"] == "401", headers
        assert reply["error"]["message"].startswith("Access denied due to invalid subscription key or wrong API endpoint.")
    status, _, _ = await call(session, "POST", sim.url + "/openai/v1/chat/completions", chat(DEPLOYMENT))
    assert status == 401
    # elsewhere the api-key header is a credential like the others
    assert (await call(session, "POST", sim.url + "/v1/chat/completions", chat("sim-model"), AZ))[0] == 200


async def test_v1_route_takes_the_deployment_from_the_body(sim, session):
    url = sim.url + "/openai/v1/chat/completions"
    status, _, reply = await call(session, "POST", url, chat(DEPLOYMENT), AZ)
    assert status == 200 and reply["model"] == DEPLOYMENT and "prompt_filter_results" in reply
    assert (await call(session, "POST", url + "?api-version=preview", chat(DEPLOYMENT), AZ))[0] == 200
    status, _, reply = await call(session, "POST", url, chat(), AZ)
    assert status == 400 and "model" in reply["error"]["message"]


async def test_unknown_deployment_is_azures_404_with_strict_model(session):
    async with await start_sim(SimConfig(served_model_name=DEPLOYMENT, strict_model=True)) as sim:
        url = f"{sim.url}/openai/deployments/other/chat/completions?api-version={VERSION}"
        status, _, reply = await call(session, "POST", url, chat(DEPLOYMENT))
        assert status == 404 and reply["error"]["code"] == "DeploymentNotFound"
        good = f"{sim.url}{CLASSIC}?api-version={VERSION}"
        assert (await call(session, "POST", good, chat("other")))[0] == 200


async def test_refusal_is_the_prompt_filters_400(session):
    faults = SimFaults(rate=1.0, kinds=("refusal",))
    async with await start_sim(SimConfig(faults=faults)) as sim:
        status, _, reply = await call(session, "POST", f"{sim.url}{CLASSIC}?api-version={VERSION}", chat())
    assert status == 400
    error = reply["error"]
    assert error["code"] == "content_filter" and error["param"] == "prompt" and error["status"] == 400
    assert error["message"].startswith("The response was filtered due to the prompt triggering Azure OpenAI's "
                                       "content management policy.")
    assert error["innererror"] == {"code": "ResponsibleAIPolicyViolation",
                                   "content_filter_result": {"violence": {"filtered": True, "severity": "medium"}}}


async def test_azure_model_lists_name_base_models_never_deployments(sim, session):
    for path in (f"/openai/models?api-version={VERSION}", "/openai/v1/models"):
        status, _, listing = await call(session, "GET", sim.url + path, headers=AZ)
        ids = [m["id"] for m in listing["data"]]
        assert status == 200 and {"gpt-4o", "gpt-4.1"} <= set(ids)
        assert DEPLOYMENT not in ids and sim.config.served_model_name not in ids
        assert (await call(session, "GET", sim.url + path))[0] == 401
        assert (await call(session, "GET", sim.url + path, headers={"Authorization": f"Bearer {KEY}"}))[0] == 401
    assert (await call(session, "GET", sim.url + "/openai/models", headers=AZ))[0] == 404


async def test_openai_sdk_azure_client_chat_and_batch_round_trip(sim):
    client = openai.AsyncAzureOpenAI(azure_endpoint=sim.url, api_version=VERSION, api_key=KEY, max_retries=0)
    reply = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert reply.model == DEPLOYMENT and reply.choices[0].message.content
    pinned = openai.AsyncAzureOpenAI(azure_endpoint=sim.url, api_version=VERSION, api_key=KEY,
                                     azure_deployment=DEPLOYMENT, max_retries=0)
    assert (await pinned.chat.completions.create(model="ignored", messages=MESSAGES)).model == DEPLOYMENT

    lines = [{"custom_id": f"q{i}", "method": "POST", "url": "/chat/completions",
              "body": {"model": DEPLOYMENT, "messages": MESSAGES}} for i in range(3)]
    upload = await client.files.create(file=("batch.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode()),
                                       purpose="batch")
    assert (await client.files.retrieve(upload.id)).id == upload.id
    batch = await client.batches.create(input_file_id=upload.id, endpoint="/chat/completions",
                                        completion_window="24h")
    assert batch.endpoint == "/chat/completions"
    done = await client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 3
    assert [b.id for b in (await client.batches.list()).data] == [batch.id]
    out = [json.loads(x) for x in (await client.files.content(done.output_file_id)).text.splitlines()]
    assert sorted(o["custom_id"] for o in out) == ["q0", "q1", "q2"]
    assert all(o["response"]["status_code"] == 200 and o["response"]["body"]["model"] == DEPLOYMENT for o in out)
    assert all("prompt_filter_results" in o["response"]["body"] for o in out)

    azure = [h for h in sim.heard if h.path.startswith("/openai/")]
    assert len(azure) == 8
    assert all("api-key" in h.auth and "bearer" not in h.auth for h in azure)
    assert all(h.query == {"api-version": VERSION} for h in azure)
    assert {h.route for h in azure} >= {"/openai/deployments/{deployment}/chat/completions", "/openai/files",
                                        "/openai/batches", "/openai/batches/{batch_id}",
                                        "/openai/files/{file_id}/content"}
    assert sim.counters.snapshot()["completions"] == 5

    entra = openai.AsyncAzureOpenAI(azure_endpoint=sim.url, api_version=VERSION, azure_ad_token=TOKEN, max_retries=0)
    assert (await entra.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)).model == DEPLOYMENT
    assert sim.heard[-1].auth == ("bearer",)


async def test_openai_sdk_on_the_v1_route(sim):
    client = openai.AsyncOpenAI(base_url=sim.url + "/openai/v1/", api_key=KEY, default_headers={"api-key": KEY},
                                max_retries=0)
    reply = await client.chat.completions.create(model=DEPLOYMENT, messages=MESSAGES)
    assert reply.model == DEPLOYMENT and reply.choices[0].message.content
    lines = [{"custom_id": "only", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": DEPLOYMENT, "messages": MESSAGES}}]
    upload = await client.files.create(file=("b.jsonl", (json.dumps(lines[0]) + "\n").encode()), purpose="batch")
    batch = await client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
    done = await client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    heard = [h for h in sim.heard if h.path.startswith("/openai/v1/")]
    assert heard[0].route == "/openai/v1/chat/completions" and heard[0].query == {}
    assert all(set(h.auth) == {"api-key", "bearer"} for h in heard)


# ---- OpenRouter -----------------------------------------------------------------------------------

async def test_openrouter_reply_carries_provider_and_cost(sim, session):
    url = sim.url + "/api/v1/chat/completions"
    status, _, reply = await call(session, "POST", url, chat("anthropic/claude-sonnet-4.5", usage={"include": True},
                                                             provider={"order": ["Azure"], "allow_fallbacks": False}), OR)
    assert status == 200 and reply["model"] == "anthropic/claude-sonnet-4.5" and reply["provider"] == "Azure"
    usage = reply["usage"]
    expected = (usage["prompt_tokens"] * 2.5 + usage["completion_tokens"] * 10.0) / 1e6
    assert usage["cost"] == pytest.approx(expected) and usage["cost"] > 0
    assert usage["cost_details"] == {"upstream_inference_cost": None}
    status, _, reply = await call(session, "POST", url, chat("openai/gpt-4o"), OR)
    assert reply["provider"] == "SimProvider" and reply["id"].startswith("gen-")
    status, _, reply = await call(session, "POST", url, chat("openai/gpt-4o", provider=["Azure"]), OR)
    assert status == 400 and reply["error"]["code"] == 400 and "provider" in reply["error"]["message"]
    for headers in ({}, {"api-key": KEY}, {"Authorization": "Bearer nope"}):
        status, _, reply = await call(session, "POST", url, chat("openai/gpt-4o"), headers)
        assert status == 401 and reply["error"]["code"] == 401


async def test_credits_run_out_with_402_and_a_top_up_resumes(session):
    async with await start_sim(SimConfig(credits=1e-9)) as sim:
        url = sim.url + "/api/v1/chat/completions"
        assert (await call(session, "POST", url, chat("openai/gpt-4o")))[0] == 200
        assert sim.credits is not None and sim.credits < 0
        status, _, reply = await call(session, "POST", url, chat("openai/gpt-4o"))
        assert status == 402 and reply["error"]["code"] == 402
        assert reply["error"]["message"].startswith("Insufficient credits. This account never purchased credits.")
        assert sim.counters.snapshot()["completions"] == 1
        status, _, balance = await call(session, "POST", sim.url + "/sim/credits", {"credits": 1.0})
        assert status == 200 and balance["remaining"] == 1.0
        status, _, reply = await call(session, "POST", url, chat("openai/gpt-4o"))
        assert status == 200 and sim.credits == pytest.approx(1.0 - reply["usage"]["cost"])
        sim.credits = 0.0
        assert (await call(session, "POST", url, chat("openai/gpt-4o")))[0] == 402
        sim.credits = None
        assert (await call(session, "POST", url, chat("openai/gpt-4o")))[0] == 200
        assert sim.counters.snapshot()["completions"] == 3


async def test_key_and_model_routes(session):
    async with await start_sim(SimConfig(api_key=KEY, credits=5.0, served_model_name="acme/vlm-1")) as sim:
        status, _, reply = await call(session, "POST", sim.url + "/api/v1/chat/completions", chat("acme/vlm-1"), OR)
        cost = reply["usage"]["cost"]
        status, _, key = await call(session, "GET", sim.url + "/api/v1/key", headers=OR)
        data = key["data"]
        assert status == 200 and data["label"].startswith("sk-or-v1-") and KEY not in json.dumps(key)
        assert data["limit"] == 5.0 and data["limit_remaining"] == pytest.approx(5.0 - cost)
        assert data["usage"] == pytest.approx(cost) and data["is_free_tier"] is False
        assert (await call(session, "GET", sim.url + "/api/v1/key"))[0] == 401
        status, _, models = await call(session, "GET", sim.url + "/api/v1/models")
        ids = [m["id"] for m in models["data"]]
        assert status == 200 and "acme/vlm-1" in ids and "openai/gpt-4o" in ids
        assert models["data"][0]["pricing"]["prompt"] == f"{2.5 / 1e6:.10f}"
    async with await start_sim(SimConfig()) as sim:
        _, _, key = await call(session, "GET", sim.url + "/api/v1/key")
        assert key["data"]["limit"] is None and key["data"]["limit_remaining"] is None


async def test_openrouter_rate_limit_headers(session):
    async with await start_sim(SimConfig(faults=SimFaults(rps=0.5, rate_headers="openai"))) as sim:
        url = sim.url + "/api/v1/chat/completions"
        before_ms = time.time() * 1000
        status, headers, _ = await call(session, "POST", url, chat("openai/gpt-4o"))
        assert status == 200 and headers["X-RateLimit-Limit"] == "30"
        assert not any(n.lower().startswith("x-ratelimit-") and n.lower().endswith(("-requests", "-tokens"))
                       for n in headers)
        status, headers, reply = await call(session, "POST", url, chat("openai/gpt-4o"))
        assert status == 429 and headers["X-RateLimit-Remaining"] == "0" and headers["X-RateLimit-Limit"] == "30"
        assert int(headers["X-RateLimit-Reset"]) > before_ms and "Retry-After" in headers
        assert reply["error"]["code"] == 429
        assert reply["error"]["metadata"]["headers"] == {k: headers[k] for k in
                                                         ("X-RateLimit-Limit", "X-RateLimit-Remaining",
                                                          "X-RateLimit-Reset")}
    async with await start_sim(SimConfig(faults=SimFaults(rate=1.0, kinds=("429",)))) as sim:
        status, headers, _ = await call(session, "POST", sim.url + "/api/v1/chat/completions", chat("x/y"))
        assert status == 429 and headers["X-RateLimit-Remaining"] == "0" and "X-RateLimit-Reset" in headers


# ---- what the simulator heard ---------------------------------------------------------------------

async def test_heard_log_names_credential_forms_never_values(sim, session):
    attribution = {"HTTP-Referer": "https://evalkit.example", "X-Title": "evalkit", "X-OpenRouter-Title": "ek"}
    await call(session, "POST", sim.url + "/api/v1/chat/completions",
               chat("openai/gpt-4o", provider={"order": ["Together"]}), {**OR, **attribution, "x-extra": "no"})
    await call(session, "POST", f"{sim.url}{CLASSIC}?api-version={VERSION}&key={KEY}", chat(), AZ)
    await call(session, "POST", sim.url + "/v1/messages", {"model": "m", "max_tokens": 4, "messages": MESSAGES},
               {"x-api-key": KEY})
    await call(session, "GET", sim.url + "/sim/counters")
    heard = sim.heard
    assert [h.method for h in heard] == ["POST"] * 3
    openrouter, azure, anthropic = heard
    assert openrouter.route == "/api/v1/chat/completions" and openrouter.auth == ("bearer",)
    assert openrouter.headers == attribution and openrouter.provider == {"order": ["Together"]}
    assert azure.auth == ("api-key", "key-query") and azure.query == {"api-version": VERSION, "key": "<withheld>"}
    assert azure.route == CLASSIC.replace(DEPLOYMENT, "{deployment}") and azure.path == CLASSIC
    assert azure.headers == {} and azure.provider is None
    assert anthropic.auth == ("x-api-key",)
    assert KEY not in repr(heard) and TOKEN not in repr(heard)
    status, _, listed = await call(session, "GET", sim.url + "/sim/heard")
    assert status == 200 and [h["route"] for h in listed][0] == "/api/v1/chat/completions"
    assert KEY not in json.dumps(listed)
    await call(session, "POST", sim.url + "/sim/reset")
    assert sim.heard == ()


# ---- hostile twins of the new routes -----------------------------------------------------------------

async def test_hostile_twins_of_the_new_routes(sim, session):
    url = f"{sim.url}/hostile/content-number{CLASSIC}?api-version={VERSION}"
    status, _, reply = await call(session, "POST", url, chat(), AZ)
    assert status == 200 and reply["choices"][0]["message"]["content"] == 42 and "prompt_filter_results" in reply
    assert (await call(session, "POST", f"{sim.url}/hostile/content-number{CLASSIC}", chat(), AZ))[0] == 404
    assert (await call(session, "POST", url, chat(), OR))[0] == 401
    async with session.post(sim.url + "/hostile/echo-key/openai/v1/chat/completions", json=chat(DEPLOYMENT),
                            headers=AZ) as resp:
        assert resp.status == 400 and KEY in await resp.text()
    status, _, reply = await call(session, "POST", sim.url + "/hostile/usage-string/api/v1/chat/completions",
                                  chat("openai/gpt-4o"), OR)
    assert status == 200 and reply["usage"] == "a great many tokens" and reply["provider"] == "SimProvider"
    assert sim.counters.snapshot()["completions"] == 0


# ---- `evalkit sim` flags --------------------------------------------------------------------------

def test_command_line_flags():
    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    config = config_from_args(parser.parse_args(["--api-key", "k", "--entra-token", "t", "--credits", "2.5"]))
    assert (config.api_key, config.entra_token, config.credits) == ("k", "t", 2.5)
    assert config_from_args(parser.parse_args([])).credits is None
    with pytest.raises(ValueError, match="Entra"):
        config_from_args(parser.parse_args(["--entra-token", "t"]))
