"""URL credentials and a bearer key cannot both be given: one line at setup, exit 2 (issue 31 item 7).

`--base-url http://user:pw@host/v1` with VLLM_API_KEY set failed every query unsent ("Cannot combine
AUTHORIZATION header with … credentials encoded in URL"), then exit 1 "re-run to resume", which could never
help: the URL's user:password@ is sent as Basic auth and the key as a bearer token, in the one Authorization
header. Now the command stops before anything is written, naming both. A key that travels in a header of its
own (Azure's `api-key`, Anthropic's `x-api-key`, Gemini's `x-goog-api-key`) still goes with URL credentials.
"""

from __future__ import annotations

import pytest
from cli_under_test import run_main
from run_factory import make_run, record
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.providers import api_key_for, parse_spec
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

PASSWORD = "pw-canary-8c2d4e6f"  # must appear nowhere the command prints


def _refused(proc) -> str:  # noqa: ANN001
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert PASSWORD not in proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    return line


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_mcq_jsonl(tmp_path_factory.mktemp("ds"), 4, seed=4)


def test_url_credentials_with_a_vllm_key_stop_at_setup(data, tmp_path):
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        url = sim.url.replace("http://", f"http://alice:{PASSWORD}@") + "/v1"
        proc = run_main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", url, "--data", str(data),
                        "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
                       env={"VLLM_API_KEY": "vllm-key"}, cwd=tmp_path)
        heard = sim.heard
    assert _refused(proc) == (
        "evalkit: error: --model vllm/sim-model: the base URL carries user:password@ (sent as Basic auth) and "
        "VLLM_API_KEY is set (sent as a bearer token), but both go in the one Authorization header: give the URL "
        "without user:password@ (--base-url or VLLM_BASE_URL), or unset VLLM_API_KEY")
    assert heard == () and not out.exists()


def test_the_judge_is_checked_alike(data, tmp_path):
    proc = run_main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--judge",
                    "openai-compatible/j", "--judge-base-url", f"http://bob:{PASSWORD}@127.0.0.1:9/v1",
                    "--data", str(data), "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"],
                   env={"OPENAI_API_KEY": "judge-key"})
    line = _refused(proc)
    assert line.startswith("evalkit: error: --judge openai-compatible/j: the base URL carries user:password@")
    assert "(--judge-base-url or OPENAI_BASE_URL), or unset OPENAI_API_KEY" in line
    assert not (tmp_path / "run").exists()


def test_report_checks_its_judge(tmp_path):
    run = make_run(tmp_path / "run", "m", [record("q1", True), record("q2", False)])
    proc = run_main(["report", str(run), "--judge", "vllm/j", "--judge-base-url",
                    f"http://bob:{PASSWORD}@127.0.0.1:9/v1"], env={"VLLM_API_KEY": "k"})
    assert _refused(proc).startswith("evalkit: error: --judge vllm/j: the base URL carries user:password@")


@pytest.mark.parametrize(("model", "env", "refused"), [
    ("vllm/m", {"VLLM_API_KEY": "k"}, True),
    ("vllm/m", {}, False),  # the URL's credentials alone: Basic auth, as before
    ("openai/gpt-4o", {"OPENAI_API_KEY": "k"}, True),
    ("openrouter/openai/gpt-4o", {"OPENROUTER_API_KEY": "k"}, True),
    ("azure/dep", {"AZURE_OPENAI_API_KEY": "k"}, False),  # its key is the api-key header
    ("azure/dep", {}, True),  # without a key: a Microsoft Entra ID token, as a bearer
    ("anthropic/claude-x", {"ANTHROPIC_API_KEY": "k"}, False),  # x-api-key
    ("google/gemini-x", {"GEMINI_API_KEY": "k"}, False),  # x-goog-api-key
])
def test_only_a_key_sent_as_a_bearer_conflicts(model, env, refused):
    spec = parse_spec(model, (f"https://carol:{PASSWORD}@proxy.example/v1",), env)
    if not refused:
        api_key_for(spec, env)
        return
    with pytest.raises(EvalkitError, match=rf"^--model {model}: the base URL carries user:password@") as caught:
        api_key_for(spec, env)
    message = str(caught.value)
    assert PASSWORD not in message and "carol" not in message
    if model == "openai/gpt-4o":  # its key is required: unsetting it is no way out
        assert message.endswith("(--base-url or OPENAI_BASE_URL)")
    if model == "azure/dep":
        assert message.endswith(", or set AZURE_OPENAI_API_KEY")


def test_a_user_name_alone_conflicts_too():
    """aiohttp refuses any userinfo beside an Authorization header, a password or not."""
    spec = parse_spec("vllm/m", ("http://alice@127.0.0.1:9/v1",), {})
    with pytest.raises(EvalkitError, match="user:password@"):
        api_key_for(spec, {"VLLM_API_KEY": "k"})
