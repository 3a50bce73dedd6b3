"""Bedrock's pieces one at a time (issue 34): the simulator refuses what AWS refuses (a signature by another key,
for another region, over another body, an unknown token) with AWS's own error shapes; Bedrock's error names
become evalkit's kinds; credentials are masked in every form; and the endpoint's identity is the region's URL
and the model id, never a credential."""

from __future__ import annotations

import json

import aiohttp
import pytest

from evalkit.core.errors import EvalkitError
from evalkit.providers import parse_spec
from evalkit.providers.bedrock.aws_sign import AwsKeys, AwsRedactor, sign
from evalkit.providers.bedrock.converse import response_from_converse
from evalkit.providers.bedrock.errors import bedrock_error
from evalkit.providers.registry import is_claude
from evalkit.sim.machinery.aws_shapes import AwsTestKeys
from evalkit.sim.server import SimConfig, start_sim

KEYS = AwsTestKeys("AKIAWIRETEST00000001", "wire/secret+KEY0123456789abcdefABCDEFGH", "wire-session-token/+=")
GOOD = AwsKeys(KEYS.access_key, KEYS.secret_key, KEYS.token)
MODEL = "amazon.nova-pro-v1:0"
ROUTE = "/model/amazon.nova-pro-v1%3A0/converse"
BODY = json.dumps({"messages": [{"role": "user", "content": [{"text": "Which? A. x B. y. Answer with the letter."}]}],
                   "inferenceConfig": {"maxTokens": 16}}).encode()
HEADERS = {"Content-Type": "application/json"}


@pytest.fixture
async def sim():
    async with await start_sim(SimConfig(aws_keys=KEYS, aws_region="eu-west-1")) as server:
        yield server


async def post(url: str, headers: dict[str, str], body: bytes = BODY) -> tuple[int, dict, dict]:
    import yarl

    async with aiohttp.ClientSession() as s, s.post(yarl.URL(url, encoded=True), data=body, headers=headers) as r:
        return r.status, dict(r.headers), json.loads(await r.text())


async def test_a_request_signed_as_aws_signs_it_is_answered_in_converse_shape(sim):
    url = sim.url + ROUTE
    status, _, reply = await post(url, sign(GOOD, "eu-west-1", "POST", url, BODY, HEADERS))
    assert status == 200, reply
    assert reply["stopReason"] == "end_turn" and reply["output"]["message"]["role"] == "assistant"
    assert reply["output"]["message"]["content"][0]["text"] in "AB"
    assert reply["usage"]["inputTokens"] > 0 and reply["usage"]["outputTokens"] > 0


@pytest.mark.parametrize("case, error", [
    ("another region", "InvalidSignatureException"), ("another secret", "InvalidSignatureException"),
    ("body changed after signing", "InvalidSignatureException"), ("another access key", "UnrecognizedClientException"),
    ("another session token", "UnrecognizedClientException"), ("no signature", "MissingAuthenticationTokenException")])
async def test_the_simulator_refuses_what_aws_refuses(sim, case, error):
    url = sim.url + ROUTE
    keys, region, body = GOOD, "eu-west-1", BODY
    if case == "another region":
        region = "us-east-1"
    elif case == "another secret":
        keys = AwsKeys(KEYS.access_key, "x" + KEYS.secret_key[1:], KEYS.token)
    elif case == "another access key":
        keys = AwsKeys("AKIAOTHER00000000001", KEYS.secret_key, KEYS.token)
    elif case == "another session token":
        keys = AwsKeys(KEYS.access_key, KEYS.secret_key, "other-token")
    headers = {} if case == "no signature" else sign(keys, region, "POST", url, body, HEADERS)
    if case == "body changed after signing":
        body = body.replace(b"Which?", b"Whose?")
    status, headers_back, reply = await post(url, headers, body)
    assert status == 403 and headers_back["x-amzn-ErrorType"].partition(":")[0] == error, reply
    assert set(reply) == {"message"} and KEYS.secret_key not in json.dumps(reply)
    assert sim.counters.snapshot()["requests"] == 0  # refused before the model saw it


@pytest.mark.parametrize("name, status, kind", [
    ("ThrottlingException", 429, "rate_limit"), ("ModelNotReadyException", 429, "transient"),
    ("ServiceUnavailableException", 503, "transient"), ("InternalServerException", 500, "transient"),
    ("ModelTimeoutException", 408, "timeout"), ("ValidationException", 400, "permanent"),
    ("AccessDeniedException", 403, "permanent"), ("ResourceNotFoundException", 404, "permanent")])
def test_bedrock_error_names_become_kinds(name, status, kind):
    err = bedrock_error(status, {"x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"},
                        b'{"message": "words"}', MODEL)
    assert err.kind == kind and err.status == status and err.message.startswith(f"HTTP {status}: {name}: words")
    assert (f"(model '{MODEL}')" in err.message) == (name in ("AccessDeniedException", "ResourceNotFoundException"))


def test_a_guardrail_stop_is_a_refusal_and_usage_counts_the_prompt_cache():
    with pytest.raises(Exception, match="guardrail_intervened") as refused:
        response_from_converse({"output": {"message": {"content": [{"text": "blocked"}]}},
                                "stopReason": "guardrail_intervened", "usage": {}})
    assert refused.value.kind == "refused"
    out = response_from_converse({"output": {"message": {"content": [
        {"reasoningContent": {"reasoningText": {"text": "think"}}}, {"text": "B"}]}}, "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "cacheReadInputTokens": 90, "cacheWriteInputTokens": 5, "outputTokens": 3}})
    assert (out.text, out.reasoning, out.usage.input_tokens, out.usage.cached_input_tokens) == ("B", "think", 105, 90)


def test_every_credential_form_is_masked():
    signed = sign(GOOD, "eu-west-1", "POST", "https://bedrock-runtime.eu-west-1.amazonaws.com" + ROUTE, BODY, HEADERS)
    redact = AwsRedactor([KEYS.access_key, KEYS.secret_key, KEYS.token])
    text = redact(f"echo: {signed} secret={KEYS.secret_key} X-Amz-Security-Token={KEYS.token}")
    signature = signed["Authorization"].rpartition("Signature=")[2]
    assert not [s for s in (KEYS.access_key, KEYS.secret_key, KEYS.token, signature) if s in text]
    assert "Signature=***" in text and "X-Amz-Security-Token=***" in text


def test_the_endpoint_is_the_regions_url_and_the_model_id_never_a_credential():
    env = {"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": KEYS.access_key, "AWS_SECRET_ACCESS_KEY": KEYS.secret_key}
    spec = parse_spec("bedrock/eu.amazon.nova-pro-v1:0", env=env)
    assert spec.endpoint == "https://bedrock-runtime.eu-west-1.amazonaws.com" and spec.model == "eu.amazon.nova-pro-v1:0"
    assert parse_spec("bedrock/x", env={**env, "AWS_REGION": "us-east-1"}).endpoint != spec.endpoint
    moved = parse_spec("bedrock/x", env={**env, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": "http://127.0.0.1:9/"})
    assert moved.endpoint == "http://127.0.0.1:9"
    with pytest.raises(EvalkitError, match="AWS_REGION is not set"):
        parse_spec("bedrock/amazon.nova-pro-v1:0", env={})
    assert is_claude("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert is_claude("bedrock", "anthropic.claude-3-5-haiku")
    assert not is_claude("bedrock", "amazon.nova-pro-v1:0") and not is_claude("bedrock", "meta.llama3-2-11b-instruct-v1:0")


def test_evalkit_sim_takes_the_test_credentials_and_region():
    import argparse

    from evalkit.sim.args import add_sim_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_sim_arguments(parser)
    config = config_from_args(parser.parse_args(["--aws-keys", "AKIA1:s3cret/+:tok", "--aws-region", "eu-west-1"]))
    assert config.aws_keys == AwsTestKeys("AKIA1", "s3cret/+", "tok") and config.aws_region == "eu-west-1"
    assert config_from_args(parser.parse_args([])).aws_keys is None
    with pytest.raises(ValueError, match="--aws-keys: expected ACCESS_KEY:SECRET"):
        config_from_args(parser.parse_args(["--aws-keys", "AKIA1"]))


def test_the_reasoning_switch_reaches_each_bedrock_route():
    from evalkit.core.types import GenParams, Message
    from evalkit.providers.bedrock.converse import converse_body
    from evalkit.providers.reasoning import reasoning_problem

    ask = [Message.system("Be brief."), Message.user("Which?")]
    body = converse_body(ask, GenParams(reasoning_effort="low", max_tokens=64, stop=("\n",)), [])
    assert body["additionalModelRequestFields"] == {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}}
    assert body["system"] == [{"text": "Be brief."}] and body["messages"] == [{"role": "user", "content": [{"text": "Which?"}]}]
    assert body["inferenceConfig"] == {"maxTokens": 64, "temperature": 0.0, "stopSequences": ["\n"]}
    off = converse_body(ask, GenParams(reasoning_effort="none"), [])["additionalModelRequestFields"]
    assert off == {"reasoningConfig": {"type": "disabled"}}
    assert "thinking-budget: bedrock/amazon.nova-pro-v1:0 goes through Converse" in reasoning_problem(
        "bedrock", MODEL, None, 2048)
    assert reasoning_problem("bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0", None, 2048) is None
    assert "needs at least 1024" in reasoning_problem("bedrock", "anthropic.claude-sonnet-4-20250514-v1:0", None, 100)


def test_the_prefix_hasher_gives_each_body_its_own_sha256():
    import hashlib
    import os

    from evalkit.providers.bedrock.aws_sign import PrefixHasher

    image = os.urandom(30_000).hex().encode()
    hasher = PrefixHasher(keep=2)
    bodies = [b'{"messages": [{"image": "' + image + b'"}, {"text": "q%d"}]}' % i for i in range(3)]
    head = len(b'{"messages": [{"image": "') + len(image)
    for body in bodies * 2 + [b"other" + image, image]:  # a shared head, a body without it, a shorter one
        assert hasher.hexdigest(body, head if body.startswith(b"{") else 0) == hashlib.sha256(body).hexdigest()


def test_credentials_refreshed_during_a_run_are_masked_too(monkeypatch):
    """botocore's chain renews a temporary session as it expires: the new secret and session token
    must be masked by the redactors made before the renewal, as the first ones are."""
    from types import SimpleNamespace

    import evalkit.providers.bedrock.aws_sign as aws_sign

    frozen = [SimpleNamespace(access_key="ASIAFIRSTKEY0001", secret_key="first-secret-0123456789",
                              token="first-session-token-0123456789")]

    class Renewing:
        def get_frozen_credentials(self):
            return frozen[-1]

    monkeypatch.setattr(aws_sign, "_chain", lambda env, label: Renewing())
    creds = aws_sign.AwsCredentials({}, "bedrock/amazon.nova-lite-v1:0")
    redact = creds.redactor()
    assert "first-secret" not in redact("x first-secret-0123456789 y")
    frozen.append(SimpleNamespace(access_key="ASIASECONDKEY002", secret_key="second-secret-0123456789",
                                  token="second-session-token-0123456789"))
    assert creds.keys().token == "second-session-token-0123456789"
    text = redact("echo ASIASECONDKEY002 second-secret-0123456789 second-session-token-0123456789")
    assert "SECOND" not in text and "second" not in text, text
    assert "first-secret" not in redact("first-secret-0123456789")  # the earlier ones stay masked
