"""`azure/DEPLOYMENT` end to end against the simulator's Azure routes (issue 30, item 3): the classic route
with `?api-version=` and the v1 API, the key as `api-key` only (checked on the wire), one cache for both,
the prompt filter's refusal, batches that resume, and a key canary found nowhere on disk or console."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread

KEY = "azkey-canary-5d41402abc4b2a76"  # must appear nowhere the run writes or prints
VERSION = "2024-10-21"
N = 6
CLASSIC = "/openai/deployments/{deployment}/chat/completions"
V1 = "/openai/v1/chat/completions"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_mcq_jsonl(tmp_path / "ds", N, seed=11)


def _config(data: Path, **kw) -> SimConfig:
    return SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), api_key=KEY, **kw)


def _run(sim: SimThread, data: Path, out: Path, **kw):
    return run("mcq", "azure/my-gpt4o", data=str(data), base_url=sim.url, env={"AZURE_OPENAI_API_KEY": KEY},
               out=str(out), cache_dir=str(out.parent / "cache"), progress=False, plots=False, **kw)


def _chat(sim: SimThread) -> list:
    return [h for h in sim.heard if h.route in (CLASSIC, V1)]


def _nowhere(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_the_classic_route_then_the_v1_api_share_one_cache_and_send_the_key_as_api_key_only(data, tmp_path):
    with SimThread(_config(data)) as sim:
        classic = _run(sim, data, tmp_path / "run", api_version=VERSION)
        heard = _chat(sim)
        probes = [h for h in sim.heard if h.path.startswith("/openai/models")]
        assert classic.exit_code == 0, classic.messages
        assert classic.summary["metrics"]["accuracy"] == 100.0 and len(classic.records) == N
        assert len(heard) == N and {h.route for h in heard} == {CLASSIC}
        assert {h.path for h in heard} == {"/openai/deployments/my-gpt4o/chat/completions"}
        assert all(h.query == {"api-version": VERSION} and h.auth == ("api-key",) for h in heard)
        assert [(p.query, p.auth) for p in probes] == [({"api-version": VERSION}, ("api-key",))]
        # without an API version: the v1 API, and every answer already in the cache (one endpoint)
        again = _run(sim, data, tmp_path / "run2")
        assert again.exit_code == 0 and len(_chat(sim)) == N and again.summary["cache"]["hits"] == N
        fresh = _run(sim, data, tmp_path / "run3", no_cache=True)
        v1 = _chat(sim)[N:]
        assert fresh.exit_code == 0 and fresh.summary["metrics"]["accuracy"] == 100.0
        assert len(v1) == N and {h.route for h in v1} == {V1} and all(h.auth == ("api-key",) for h in v1)
    identity = json.loads((tmp_path / "run" / "config.json").read_text())["identity"]
    assert identity["endpoint"] == sim.url and identity["model"] == "azure/my-gpt4o"
    assert _nowhere(tmp_path, KEY) == []


def test_a_wrong_key_is_one_line_before_anything_is_sent(data, tmp_path):
    with SimThread(_config(data)) as sim:
        done = run_main(["run", "mcq", "--model", "azure/my-gpt4o", "--base-url", sim.url, "--data", str(data),
                        "--api-version", VERSION, "--no-progress", "--cache-dir", str(tmp_path / "cache")],
                       env={"AZURE_OPENAI_API_KEY": "wrong-" + KEY[::-1]}, cwd=tmp_path)
        assert _chat(sim) == []
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out
    assert "HTTP 401: the API key was refused" in out and KEY[::-1] not in out


def test_the_prompt_filter_is_a_refusal(data, tmp_path):
    with SimThread(_config(data, faults=SimFaults(rate=1.0, kinds=("refusal",)))) as sim:
        res = _run(sim, data, tmp_path / "run", api_version=VERSION, no_cache=True)
        assert len(_chat(sim)) == N  # a refusal is never asked again
    assert res.summary["error_kinds"] == {"refused": N}  # counted apart from failures, as OpenAI's content filter
    assert {r.error for r in res.records} == {"refused"}
    assert "content management policy" in res.records[0].error_message


def test_an_azure_batch_is_submitted_then_collected_by_the_same_command(data, tmp_path):
    with SimThread(_config(data)) as sim:
        sim.batches.behaviour.frozen = True
        first = _run(sim, data, tmp_path / "run", api_version=VERSION, batch=True, wait=False)
        assert first.exit_code == 1 and first.summary["missing"] == N
        files = [h for h in sim.heard if h.path.startswith("/openai/files")]
        assert files and all(h.query.get("api-version") == VERSION and h.auth == ("api-key",) for h in files)
        sim.batches.behaviour.frozen = False
        second = _run(sim, data, tmp_path / "run", api_version=VERSION, batch=True)
        assert second.exit_code == 0 and second.summary["metrics"]["accuracy"] == 100.0
        assert sim.batches.counts["lines"] == N and sim.batches.counts["batches"] == 1  # never submitted twice
        assert {r.via for r in second.records} == {"batch"} and _chat(sim) == []
        v1 = _run(sim, data, tmp_path / "v1", batch=True, no_cache=True)  # the v1 API's batch routes
        assert v1.exit_code == 0 and sim.batches.counts["lines"] == 2 * N
        assert all(h.auth == ("api-key",) for h in sim.heard if h.path.startswith("/openai/v1/"))
    assert _nowhere(tmp_path, KEY) == []
