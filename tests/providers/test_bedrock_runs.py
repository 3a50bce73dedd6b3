"""`bedrock/MODEL_ID` end to end against the simulator's Bedrock routes, which recompute every SigV4 signature
with botocore's signer from fixed test credentials (issue 34): Claude through the anthropic SDK's Bedrock
client on `/model/{id}/invoke`, Amazon Nova through the Converse API signed by botocore over aiohttp. Each
answers, resumes without a request, is found in the cache from a fresh --out, costs what the price table
says, gets through faults and Bedrock's throttling, and writes no credential anywhere (canary)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.ask.confirm import ALIKE, AllFailAlike
from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.sim.extension import SimRoutes
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.aws_shapes import AwsTestKeys, aws_error
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread

# canaries: none of these may appear in anything the run writes or prints
KEYS = AwsTestKeys("AKIAEVALKITCANARY0001", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYCANARYKEY1", "FwoGZXIvYXdzEJr//CANARY+token==")
ENV = {"AWS_ACCESS_KEY_ID": KEYS.access_key, "AWS_SECRET_ACCESS_KEY": KEYS.secret_key,
       "AWS_SESSION_TOKEN": KEYS.token or "", "AWS_REGION": "us-east-1"}
NOVA = "us.amazon.nova-lite-v1:0"
CLAUDE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
ROUTES = {NOVA: "/model/{model_id}/converse", CLAUDE: "/model/{model_id}/invoke"}
# USD per million (input, output): Nova Lite's on-demand price; Haiku 4.5 through a geographic profile, 1.1x
PRICES = {NOVA: (0.06, 0.24), CLAUDE: (1.1, 5.5)}
N = 6


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_mcq_jsonl(tmp_path_factory.mktemp("bedrock-data"), N, seed=34)


def _config(data: Path, **kw) -> SimConfig:
    return SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), aws_keys=KEYS, **kw)


class LeakyRoutes:
    """A twin of every route under /leak that answers with a ValidationException quoting the request's
    Authorization and X-Amz-Security-Token headers, as a careless proxy might; the signatures it saw are kept."""

    def __init__(self) -> None:
        self.signatures: list[str] = []

    def __call__(self, routes: SimRoutes) -> None:
        def wrap(dialect, normal):
            async def leak(request):
                auth = request.headers.get("Authorization", "")
                signature = auth.rpartition("Signature=")[2]
                self.signatures.append(signature)
                words = (f"bad request: X-Amz-Security-Token: {request.headers.get('X-Amz-Security-Token')} "
                         f"Signature={signature} from {auth}")
                return aws_error(400, "ValidationException", words)
            return leak
        routes.add_twins("/leak", wrap)


@pytest.fixture(scope="module")
def leaks() -> LeakyRoutes:
    return LeakyRoutes()


@pytest.fixture(scope="module")
def sim(data, leaks):
    with SimThread(_config(data), routes=leaks) as server:
        yield server


# Injected faults drawn in the order requests arrive, whatever the machine's speed: with seed 2 the
# six answers meet three ThrottlingExceptions (Bedrock's 429, no Retry-After), one 500 and one 503. Not
# the simulator's request rate (rps): whether a request is refused by a rate depends on the clock, and a
# busy machine sends too slowly to be throttled at all.
FAULTS = SimFaults(rate=0.4, kinds=("429", "500", "503"), seed=2)
DRAWN = {"429": 3, "500": 1, "503": 1}


@pytest.fixture
def faulty(data):
    # a server per test, so each test meets the same draws
    with SimThread(_config(data, faults=FAULTS)) as server:
        yield server


def _run(url: str, data: Path, model: str, out: Path, **kw):
    return run("mcq", f"bedrock/{model}", data=str(data), base_url=url, env=ENV, out=str(out),
               cache_dir=str(out.parent / "cache"), progress=False, plots=False, **kw)


def _asked(sim: SimThread, model: str) -> list:
    return [h for h in sim.heard if h.route == ROUTES[model] and model in h.path.replace("%3A", ":")]


def _holding(root: Path, secrets: list[str]) -> list[str]:
    return [f"{p}: {s[:6]}…" for p in root.rglob("*") if p.is_file() for s in secrets if s.encode() in p.read_bytes()]


@pytest.mark.parametrize("model", [NOVA, CLAUDE])
def test_answers_resumes_for_free_is_cached_and_costs_the_table_price(model, sim, data, tmp_path):
    first = _run(sim.url, data, model, tmp_path / "run")
    asked = _asked(sim, model)
    assert first.exit_code == 0, first.messages
    assert first.summary["metrics"]["accuracy"] == 100.0 and len(first.records) == N
    assert len(asked) == N and all(h.auth == ("sigv4", "x-amz-security-token") for h in asked)
    usage = first.summary["usage"]
    price_in, price_out = PRICES[model]
    expected = (usage["input_tokens"] * price_in + usage["output_tokens"] * price_out) / 1e6
    assert usage["cost_usd"] > 0 and usage["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert first.summary["config"]["price"]["read_on"] == "2026-11-27"
    again = _run(sim.url, data, model, tmp_path / "run")  # the same command: every answer is already there
    assert again.exit_code == 0 and len(_asked(sim, model)) == N and again.summary["this_run"]["sent"] == 0
    fresh = _run(sim.url, data, model, tmp_path / "fresh")  # a new run directory: answered from the cache
    assert fresh.exit_code == 0 and fresh.summary["cache"]["hits"] == N and len(_asked(sim, model)) == N
    identity = json.loads((tmp_path / "run" / "config.json").read_text())["identity"]
    assert identity["endpoint"] == sim.url and identity["model"] == f"bedrock/{model}"


async def test_claudes_signature_holds_when_httpx_would_ask_for_other_encodings(sim, data):
    """The guarded client's request hook sets Accept-Encoding after the SDK has signed: with brotli installed,
    httpx's own default (`gzip, deflate, br`) would be signed and then changed (InvalidSignatureException)."""
    from evalkit.core.types import GenParams, Message
    from evalkit.providers import create_provider, parse_spec

    provider = create_provider(parse_spec(f"bedrock/{CLAUDE}", [sim.url], ENV), ENV)
    try:
        provider._client._client.headers["Accept-Encoding"] = "gzip, deflate, br"  # as with brotli installed
        reply = await provider.complete([Message.user("Which? A. x B. y. Answer with the letter.")], GenParams(), [])
    finally:
        await provider.close()
    assert reply.text and reply.usage.output_tokens > 0


@pytest.mark.parametrize("model", [NOVA, CLAUDE])
def test_faults_and_throttling_are_waited_out(model, faulty, data, tmp_path, fast_backoff):
    res = _run(faulty.url, data, model, tmp_path / "run", no_cache=True)
    assert res.exit_code == 0, res.messages
    assert res.summary["metrics"]["accuracy"] == 100.0 and res.summary["counts"]["errors"] == 0
    assert faulty.counters.snapshot()["faults"] == DRAWN
    thru = res.summary["throughput"]
    assert thru["rate_limited"] == DRAWN["429"]  # ThrottlingException is read as a rate limit
    assert thru["retries"] == sum(DRAWN.values())  # each throttled or failed request asked again, once
    assert len(_asked(faulty, model)) == N + sum(DRAWN.values())


def test_wrong_credentials_stop_at_the_first_request_with_exit_2(sim, data, tmp_path):
    before = len(_asked(sim, NOVA))
    wrong = {**ENV, "AWS_SECRET_ACCESS_KEY": "wrong" + KEYS.secret_key[5:]}
    with pytest.raises(EvalkitError) as stopped:
        run("mcq", f"bedrock/{NOVA}", data=str(data), base_url=sim.url, env=wrong, no_cache=True,
            out=str(tmp_path / "run"), progress=False, plots=False)
    line = str(stopped.value)
    assert stopped.value.exit_code == 2 and "\n" not in line
    assert "refuses these credentials" in line and "InvalidSignatureException" in line, line
    assert len(_asked(sim, NOVA)) == before + 1  # the confirming request only
    assert KEYS.secret_key[5:] not in line


def test_an_unknown_model_id_is_exit_2_after_one_request(data, tmp_path):
    with SimThread(_config(data, strict_model=True, served_model_name=NOVA)) as strict:
        with pytest.raises(EvalkitError, match="The provided model identifier is invalid") as stopped:
            _run(strict.url, data, "us.amazon.nova-nope-v1:0", tmp_path / "run")
        assert len(strict.heard) == 1  # the confirming request only
    assert stopped.value.exit_code == 2


def _leaky_then_good(model: str, url: str, data: Path, tmp_path: Path, cli: bool) -> list[str]:
    """A run through the echoing routes (the same error to every request: it stops after ALIKE of them,
    evalkit.ask.confirm), then a good one with the cache: (their console output)."""
    leak = ["--base-url", url + "/leak", "--no-cache", "--out", str(tmp_path / "run")]
    good = ["--base-url", url, "--out", str(tmp_path / "good"), "--cache-dir", str(tmp_path / "cache")]
    if not cli:  # in this process (Claude: no child importing the anthropic SDK again)
        with pytest.raises(AllFailAlike) as stopped:
            run("mcq", f"bedrock/{model}", data=str(data), base_url=url + "/leak", env=ENV, no_cache=True,
                out=str(tmp_path / "run"), progress=False, plots=False)
        ok = _run(url, data, model, tmp_path / "good")
        assert ok.exit_code == 0, ok.messages
        return [str(stopped.value), *ok.messages]
    shown = []
    for flags, code in ((leak, 2), (good, 0)):
        done = run_main(["run", "mcq", "--model", f"bedrock/{model}", "--data", str(data), "--no-progress", *flags],
                       env=ENV, cwd=tmp_path)
        assert done.returncode == code, done.stderr[-2000:]
        shown.append(done.stdout + done.stderr)
    return shown


@pytest.mark.parametrize("model, cli", [(NOVA, True), (CLAUDE, False)])
def test_no_credential_is_written_or_printed_even_when_a_server_echoes_them(model, cli, sim, leaks, data, tmp_path,
                                                                           capfd):
    shown = _leaky_then_good(model, sim.url, data, tmp_path, cli)
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == ALIKE and all("ValidationException" in r["error_message"] for r in records)
    messages = [r["error_message"] for r in records]  # the message kept, the secrets in it masked
    assert all("X-Amz-Security-Token: *** Signature=***" in m for m in messages), messages[0]
    secrets = [KEYS.access_key, KEYS.secret_key, KEYS.token or "", *(s for s in leaks.signatures if s)]
    assert leaks.signatures and _holding(tmp_path, secrets) == []
    printed = capfd.readouterr()
    for text in (*shown, printed.out, printed.err):
        assert not [s for s in secrets if s in text]


@pytest.mark.parametrize("model", [NOVA, CLAUDE])
def test_a_bedrock_api_key_goes_as_a_bearer_token_instead_of_a_signature(model, data, tmp_path):
    key = "ABSKQmVkcm9ja0FQSUtleS1jYW5hcnk="  # canary: a Bedrock API key
    with SimThread(_config(data, api_key=key)) as keyed:
        res = run("mcq", f"bedrock/{model}", data=str(data), base_url=keyed.url, out=str(tmp_path / "run"), no_cache=True,
            env={"AWS_BEARER_TOKEN_BEDROCK": key, "AWS_REGION": "us-east-1"}, progress=False, plots=False)
        assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
        assert {h.auth for h in _asked(keyed, model)} == {("bearer",)}
    assert _holding(tmp_path, [key]) == []


def test_no_credentials_anywhere_is_one_line(monkeypatch):
    from evalkit.providers import create_provider, parse_spec

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_BEARER_TOKEN_BEDROCK", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role lookup: nothing leaves 127.0.0.1
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    env = {"AWS_REGION": "us-east-1"}
    with pytest.raises(EvalkitError, match=r"^--model bedrock/\S+: no AWS credentials found \(set AWS_ACCESS_KEY_ID"):
        create_provider(parse_spec(f"bedrock/{NOVA}", ["http://127.0.0.1:9"], env), env)


@pytest.mark.parametrize("model, reasoning, cut", [(NOVA, {"reasoning_effort": "low"}, True),
                                                   (CLAUDE, {"thinking_budget": 1024}, False)])
def test_thinking_is_paid_for_and_a_cut_off_is_said_as_bedrock_says_it(model, reasoning, cut, data, tmp_path):
    """The simulated model thinks 200-600 tokens. Nova under a 500-token output limit: some answers fit, the
    others are cut off while thinking (stopReason max_tokens, no text); Claude's limit is raised above its
    thinking budget (as for anthropic/), so every answer fits. Thinking is output: it is counted and paid."""
    with SimThread(_config(data, think_tokens=400)) as thinking:
        res = _run(thinking.url, data, model, tmp_path / "run", no_cache=True, max_tokens=500, **reasoning)
        assert len(_asked(thinking, model)) == N  # a cut-off is final: never asked again
    answered = [r for r in res.records if r.error is None and not r.cut_off]
    stopped = [r for r in res.records if r.cut_off]
    assert res.exit_code == 0 and answered and all(r.correct for r in answered)
    assert bool(stopped) == cut and all(r.finish_reason == "max_tokens" for r in stopped)
    assert len(answered) + len(stopped) == N and res.summary["counts"]["cutoffs"] == len(stopped)
    assert res.summary["usage"]["output_tokens"] >= 200 * N and res.summary["usage"]["cost_usd"] > 0
