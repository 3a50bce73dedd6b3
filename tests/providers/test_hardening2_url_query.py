"""A base URL with a query string or fragment is one line at setup, exit 2, never repeating the query (issue 31 item 6).

`--base-url "http://h/v1?key=SECRET"` sent every request to `…/v1?key=SECRET/chat/completions` (a 404 each,
exit 1) and wrote the key into config.json, summary.json, report.md and the view. evalkit adds its own routes
after a base URL (and Azure's `?api-version=` from --api-version), so a base URL may hold neither a query nor
a fragment: refused before anything is written or sent, for --base-url, --judge-base-url and the provider
variables alike, showing the URL only up to the `?` or `#`.
"""

from __future__ import annotations

import pytest
from cli_under_test import run_main
from run_factory import make_run, record
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.providers import parse_spec
from evalkit.providers.preflight import check_setup
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

SECRET = "qs-canary-5e1f0b7a9c"  # must appear nowhere the command writes or prints
SAID = ("has a query string or fragment, which evalkit would put in the middle of every request URL; give the "
        "server's URL without it")


def _refused(proc, flag: str) -> str:  # noqa: ANN001
    """The one line of a refused command, which must not repeat the secret."""
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert SECRET not in proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"evalkit: error: {flag}: base URL '")
    return line


def _nowhere(root, secret: str) -> list:  # noqa: ANN001
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_mcq_jsonl(tmp_path_factory.mktemp("ds"), 4, seed=2)


def test_a_key_in_the_query_is_refused_before_anything_is_sent_or_written(data, tmp_path):
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        proc = run_main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", f"{sim.url}/v1?key={SECRET}",
                        "--data", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
                        "--no-progress"], cwd=tmp_path)
        heard = sim.heard
    line = _refused(proc, "--model vllm/sim-model")
    assert line == (f"evalkit: error: --model vllm/sim-model: base URL '{sim.url}/v1?…' {SAID} (--base-url or "
                    "VLLM_BASE_URL); a key goes in VLLM_API_KEY")
    assert heard == () and not out.exists() and _nowhere(tmp_path, SECRET) == []


def test_the_judge_url_is_refused_alike(data, tmp_path):
    proc = run_main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--judge", "vllm/j",
                    "--judge-base-url", f"http://127.0.0.1:9/v1#{SECRET}", "--data", str(data),
                    "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"], env={"VLLM_API_KEY": "k"})
    line = _refused(proc, "--judge vllm/j")
    assert "'http://127.0.0.1:9/v1#…'" in line and "(--judge-base-url or VLLM_BASE_URL)" in line
    assert not (tmp_path / "run").exists()


def test_report_refuses_a_judge_url_with_a_query(tmp_path):
    run = make_run(tmp_path / "run", "m", [record("q1", True), record("q2", False)])
    proc = run_main(["report", str(run), "--judge", "vllm/j", "--judge-base-url", f"http://h:8000/v1?k={SECRET}"],
                   env={"VLLM_API_KEY": "k"})
    assert "(--judge-base-url or VLLM_BASE_URL)" in _refused(proc, "--judge vllm/j")
    assert _nowhere(tmp_path, SECRET) == []


def test_a_url_from_the_environment_is_refused_alike(data, tmp_path):
    proc = run_main(["run", "mcq", "--model", "openai-compatible/m", "--data", str(data), "--out", str(tmp_path / "r"),
                    "--no-cache", "--no-progress"], env={"OPENAI_BASE_URL": f"http://127.0.0.1:9/v1?api_key={SECRET}"})
    line = _refused(proc, "--model openai-compatible/m")
    assert "(--base-url or OPENAI_BASE_URL); a key goes in OPENAI_API_KEY" in line


@pytest.mark.parametrize(("model", "variable", "url", "shown"), [
    ("vllm/m", "VLLM_BASE_URL", f"http://h:8000/v1?key={SECRET}", "http://h:8000/v1?…"),
    ("openai/gpt-4o", "OPENAI_BASE_URL", f"https://proxy.example/v1?{SECRET}", "https://proxy.example/v1?…"),
    ("openrouter/openai/gpt-4o", "OPENROUTER_BASE_URL", f"https://or.example/api/v1?x={SECRET}",
     "https://or.example/api/v1?…"),
    ("azure/dep", "AZURE_OPENAI_ENDPOINT", f"https://res.openai.azure.com?api-version={SECRET}",
     "https://res.openai.azure.com?…"),
    ("anthropic/claude-x", "ANTHROPIC_BASE_URL", f"https://proxy.example#{SECRET}", "https://proxy.example#…"),
    ("google/gemini-x", "GEMINI_BASE_URL", f"https://g.example/?{SECRET}", "https://g.example/?…"),
])
def test_every_provider_variable_is_checked(model, variable, url, shown):
    spec = parse_spec(model, (), {variable: url})
    with pytest.raises(EvalkitError) as caught:
        check_setup(spec, sdk=False)
    message = str(caught.value)
    assert message.startswith(f"--model {model}: base URL '{shown}' {SAID} (--base-url or {variable}); ")
    assert SECRET not in message
    if model.startswith("azure/"):
        assert message.endswith("azure/ adds ?api-version= itself from --api-version")


@pytest.mark.parametrize(("url", "shown"), [
    ("http://h:8000/v1?", "http://h:8000/v1?…"),  # an empty query still breaks every route
    ("http://h:8000/v1#", "http://h:8000/v1#…"),
    (f"http://h:8000?k={SECRET}/x", "http://h:8000?…"),
    (f"http://alice:pa?ss@h:8000/v1?k={SECRET}", "http://h:8000/v1?…"),  # no credential shown either
    (f"http://alice:{SECRET}@h:8000/v1#top", "http://h:8000/v1#…"),
])
def test_the_url_is_shown_up_to_the_query_only(url, shown):
    with pytest.raises(EvalkitError, match=r"^--model vllm/m: base URL '(.*)' has a query") as caught:
        check_setup(parse_spec("vllm/m", (url,), {}), sdk=False)
    message = str(caught.value)
    assert f"'{shown}'" in message and SECRET not in message and "alice" not in message


def test_azure_classic_route_keeps_its_own_api_version(data, tmp_path):
    """The query Azure's classic route needs is evalkit's own, added after the (query-free) base URL."""
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), api_key="az-k")) as sim:
        proc = run_main(["run", "mcq", "--model", "azure/dep", "--base-url", sim.url, "--api-version", "2024-10-21",
                        "--data", str(data), "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"],
                       env={"AZURE_OPENAI_API_KEY": "az-k"})
        chat = [h for h in sim.heard if h.path.endswith("/chat/completions")]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(chat) == 4 and {h.path for h in chat} == {"/openai/deployments/dep/chat/completions"}
    assert all(h.query == {"api-version": "2024-10-21"} for h in chat)
