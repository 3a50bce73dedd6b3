"""`openrouter/VENDOR/MODEL` end to end against the simulator's OpenRouter routes (issue 30, item 4): the
vendor's model id, the bearer key and attribution on the wire, the cost each reply reports recorded as
its cost, provider routing in the body and the cache key, and a 402 that stops the run (exit 2, every
answer kept) until a top-up lets the same command finish."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

KEY = "sk-or-v1-canary-0cc175b9c0f1b6a8"
MODEL = "openrouter/openai/gpt-4o"
CHAT = "/api/v1/chat/completions"
N = 8


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_mcq_jsonl(tmp_path / "ds", N, seed=12)


def _config(data: Path, **kw) -> SimConfig:
    return SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), api_key=KEY, **kw)


def _run(sim: SimThread, data: Path, out: Path, **kw):
    return run("mcq", MODEL, data=str(data), base_url=sim.url + "/api/v1", env={"OPENROUTER_API_KEY": KEY},
               out=str(out), cache_dir=str(out.parent / "cache"), progress=False, plots=False, **kw)


def _chat(sim: SimThread) -> list:
    return [h for h in sim.heard if h.route == CHAT]


def _top_up(sim: SimThread, usd: float) -> None:
    """What the user does on OpenRouter's credits page: the simulator's POST /sim/credits."""
    request = urllib.request.Request(sim.url + "/sim/credits", data=json.dumps({"credits": usd}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request) as reply:
        assert reply.status == 200


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def test_a_vendor_model_runs_and_each_reply_s_cost_is_recorded(data, tmp_path):
    with SimThread(_config(data)) as sim:
        res = _run(sim, data, tmp_path / "run")
        heard = _chat(sim)
    assert res.exit_code == 0, res.messages
    assert res.summary["metrics"]["accuracy"] == 100.0
    assert len(heard) == N and all(h.auth == ("bearer",) and h.headers.get("X-Title") == "evalkit" for h in heard)
    records = _records(tmp_path / "run")
    costs = [r["usage"]["cost_usd"] for r in records]
    expected = [(r["usage"]["input_tokens"] * 2.5 + r["usage"]["output_tokens"] * 10.0) / 1e6 for r in records]
    assert costs == pytest.approx(expected) and min(costs) > 0  # the simulator's price, as it reported it
    assert res.summary["usage"]["cost_usd"] == pytest.approx(sum(costs))
    assert all(r["served_by"].endswith("· via SimProvider") for r in records)
    assert KEY not in (tmp_path / "run" / "records.jsonl").read_text()


def test_provider_routing_goes_in_the_body_and_the_cache_key(data, tmp_path):
    routing = {"order": ["Azure"], "allow_fallbacks": False}
    with SimThread(_config(data)) as sim:
        plain = _run(sim, data, tmp_path / "plain")
        routed = _run(sim, data, tmp_path / "routed", provider_routing=routing)
        again = _run(sim, data, tmp_path / "routed", provider_routing=routing)
        heard = _chat(sim)
    assert plain.exit_code == routed.exit_code == again.exit_code == 0
    assert len(heard) == 2 * N  # routed queries are not the plain ones' answers; the re-run sent nothing
    assert [h.provider for h in heard[N:]] == [routing] * N and {h.provider for h in heard[:N]} == {None}
    assert plain.out_dir != routed.out_dir  # another run identity
    assert all(r["served_by"].endswith("· via Azure") for r in _records(tmp_path / "routed"))


def test_out_of_credits_stops_with_exit_2_keeps_every_answer_and_resumes_after_a_top_up(data, tmp_path):
    with SimThread(_config(data, credits=0.0003)) as sim:  # a few answers' worth
        args = ["run", "mcq", "--model", MODEL, "--base-url", sim.url + "/api/v1", "--data", str(data),
                "--concurrency", "1", "--no-progress", "--out", str(tmp_path / "run"),
                "--cache-dir", str(tmp_path / "cache")]
        first = run_main(args, env={"OPENROUTER_API_KEY": KEY}, cwd=tmp_path)
        answered_then = _chat(sim)
        out = first.stdout + first.stderr
        assert first.returncode == 2 and "Traceback" not in out, out[-3000:]
        assert "HTTP 402" in out and "Insufficient credits" in out and "add credits" in out
        kept = [r for r in _records(tmp_path / "run") if r["error"] is None]
        assert 0 < len(kept) < N
        assert len(answered_then) == len(kept) + 1  # one 402, then nothing more was sent
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["stopped"] == "account"
        _top_up(sim, 10.0)
        second = run_main(args, env={"OPENROUTER_API_KEY": KEY}, cwd=tmp_path)
        assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
        assert len(_chat(sim)) == len(answered_then) + N - len(kept)  # only what was missing
    records = _records(tmp_path / "run")
    assert len(records) == N and all(r["error"] is None for r in records)
    assert KEY not in out + second.stdout + second.stderr


def test_a_key_whose_credit_is_spent_is_refused_before_anything_is_sent(data, tmp_path):
    with SimThread(_config(data, credits=0.0)) as sim:
        done = run_main(["run", "mcq", "--model", MODEL, "--base-url", sim.url + "/api/v1", "--data", str(data),
                        "--no-progress", "--cache-dir", str(tmp_path / "cache")],
                       env={"OPENROUTER_API_KEY": KEY}, cwd=tmp_path)
        assert _chat(sim) == []
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "credit limit is spent" in out and "Traceback" not in out
