"""No redirect is followed and no key leaves: not to another origin, not into anything a run writes.

evalkit 0.1.0 followed a 301/302/307 to another origin: the POST became a body-less GET (or went
again, whole, for a 307) whose answer was recorded, and the Gemini SDK sent x-goog-api-key along.
A server that echoed the key in an error had it copied into `error_message`. Each CLI test runs
the command (`evalkit.cli.main` in this process: tests/cli_under_test.py run_main) against the simulator, whose `/sink/`
route (another origin: `localhost` for `127.0.0.1`) records every header it receives.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hostile_routes import HostileRoutes
from synthetic_data import make_mcq_jsonl
from test_hostile_replies import PROVIDERS, McqRuns, Run, hostile_key, pointed_at, sim_for

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, Message
from evalkit.providers import create_provider, parse_spec
from evalkit.providers.wire.redact import Redactor
from evalkit.sim.server import SimConfig, start_sim


def key_forms(key: str) -> set[str]:
    """The key as sent, percent-encoded and base64-encoded: what an echo or a header could carry."""
    raw = key.encode()
    return {key, quote(key, safe=""), quote_plus(key), base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode().rstrip("=")}


def leaks(text: str, key: str) -> list[str]:
    return [form for form in key_forms(key) if form in text]


def written_by(run: Run) -> dict[str, str]:
    """Everything the run left for people to read: records, summary, report, the console."""
    files = {name: (run.run_dir / name).read_text() for name in ("records.jsonl", "summary.json", "report.md")}
    return {**files, "stderr": run.proc.stderr, "stdout": run.proc.stdout}


def two_queries(tmp_path: Path):
    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=11)
    return data, sim_for(data)


@pytest.mark.slow
@pytest.mark.parametrize(("status", "provider"), [(307, p) for p in PROVIDERS] + [(301, "vllm"), (302, "google"),
                                                                                  (301, "anthropic")])
def test_a_redirect_to_another_origin_is_refused_and_nothing_reaches_it(tmp_path, provider, status):
    data, sim = two_queries(tmp_path)
    with sim:
        run = McqRuns(tmp_path, data, sim)(provider, f"/hostile/redirect-{status}")
        port = sim.url.rsplit(":", 1)[1]
        sink = sim.routes.log.snapshot()["sink"]
    key = hostile_key(provider)[1]
    received = json.dumps(sink)
    assert leaks(received, key) == []  # no form of the key arrived at the other origin
    assert sink == []  # nor anything else: nothing was followed
    assert "Traceback" not in run.proc.stderr, run.proc.stderr[-3000:]
    assert run.proc.returncode == 1 and run.requests == 2  # permanent: not retried
    assert [(r["error"], r["error_message"]) for r in run.records] == [
        ("permanent", f"HTTP {status} redirect to http://localhost:{port} not followed; check the base URL")] * 2
    assert all(r["response"] in (None, "") and not r["correct"] for r in run.records)  # the sink's "A" is no answer
    for name, text in written_by(run).items():
        assert leaks(text, key) == [], name


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["vllm", "google"])
def test_a_server_echoing_the_key_does_not_get_it_into_the_run(tmp_path, provider):
    """0.1.0 copied the echo into error_message (vLLM), or masked the raw key but not its encodings
    (Gemini). The other two providers' 0.1.0 SDK messages left the server's words out altogether."""
    data, sim = two_queries(tmp_path)
    with sim:
        run = McqRuns(tmp_path, data, sim)(provider, "/hostile/echo-key")
    key = hostile_key(provider)[1]
    assert run.proc.returncode == 1 and "Traceback" not in run.proc.stderr
    assert [r["error"] for r in run.records] == ["permanent", "permanent"]
    assert all("API key not valid" in r["error_message"] and "***" in r["error_message"] for r in run.records)
    for name, text in written_by(run).items():
        assert leaks(text, key) == [], name


# ---- in process: every provider's messages, and the redactor itself -------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_provider_masks_an_echoed_key_in_every_form(provider):
    async with await start_sim(SimConfig(), routes=HostileRoutes()) as sim:
        args, env = pointed_at(provider, f"{sim.url}/hostile/echo-key")
        p = create_provider(parse_spec(f"{provider}/sim-model", [args[1]] if args else [], env=env), env)
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete([Message.user("Colour?")], GenParams(max_tokens=8), [])
        finally:
            await p.close()
    message = info.value.message
    assert info.value.kind == "permanent" and message.startswith("HTTP 400") and "API key not valid" in message
    assert leaks(message, hostile_key(provider)[1]) == [] and message.count("***") >= 3, message


async def test_url_userinfo_never_reaches_a_message():
    """Credentials in the base URL go out as Basic auth; an echo of them is masked like a key."""
    async with await start_sim(SimConfig(), routes=HostileRoutes()) as sim:
        base = sim.url.replace("://", "://evaluser:Pa55%2Bword%2Fx@") + "/hostile/echo-key/v1"
        p = create_provider(parse_spec("vllm/sim-model", [base], env={}), {})
        try:
            with pytest.raises(ProviderError) as info:
                await p.complete([Message.user("Colour?")], GenParams(max_tokens=8), [])
        finally:
            await p.close()
    basic = base64.b64encode(b"evaluser:Pa55+word/x").decode()
    assert "Basic ***" in info.value.message and basic.rstrip("=") not in info.value.message
    assert "Pa55" not in info.value.message


def test_redactor_forms_and_userinfo():
    r = Redactor(["sk-a/b+c=", None, "ab"])  # too short to mask: "ab" stays
    text = ("key sk-a/b+c= url sk-a%2Fb%2Bc%3D plus sk-a%2Fb%2Bc%3D b64 c2stYS9iK2M9 json \"sk-a/b+c=\" "
            "from https://me:secret@host.example/v1 ab")
    assert r(text) == 'key *** url *** plus *** b64 *** json "***" from https://***@host.example/v1 ab'
    assert r("") == "" and r.optional(None) is None
