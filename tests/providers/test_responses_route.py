"""OpenAI's Responses API route end to end (issue 47, items 1 and 2), through the public surface (the `evalkit`
command, `evalkit.run`, `evalkit.sim`) and the real `openai` SDK against the simulator: a `*-pro` model goes
there by default, chat models stay where they were, Azure's v1 route with its `api-key`, batches of
`/v1/responses` lines at half price, cut-offs and refusals recorded as on Chat Completions, and a chat request
for a Responses-only model as one line naming `--api responses`.

Written to run unchanged on evalkit 0.3.0, where it fails: 0.3.0 sends every model to chat/completions and
has no `--api` option."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
from cli_under_test import run_cli
from PIL import Image

import evalkit
from evalkit.sim import SimConfig, SimFaults, SimThread
from evalkit.sim.from_bench import answer_key_for

KEY = "sk-resp-canary-9e107d9d372bb6826bd81d35"  # found nowhere a run writes or prints
AZURE_KEY = "azkey-resp-canary-2c26b46b68ffc68ff99b"
N = 6


def _data(folder: Path, n: int = N) -> Path:
    """n four-option questions, each on its own picture."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    lines = []
    for i in range(n):
        Image.new("RGB", (64 + 8 * i, 48), (40 * i % 256, 90, 200 - 10 * i)).save(folder / "images" / f"{i}.png")
        lines.append({"id": f"q{i}", "image": f"images/{i}.png", "question": f"Which colour is image {i}?",
                      "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"},
                      "answer": "ABCD"[rng.randrange(4)], "category": f"c{i % 2}"})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return _data(tmp_path / "ds")


def _config(data: Path, **kw) -> SimConfig:
    return SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), api_key=KEY, **kw)


def _cli(sim: SimThread, data: Path, tmp: Path, model: str, *extra: str, out: str = "run", base: str = "/v1",
         env: dict[str, str] | None = None):
    return run_cli(["run", "mcq", "--model", model, "--base-url", sim.url + base, "--data", str(data), "--out",
                    str(tmp / out), "--cache-dir", str(tmp / "cache"), "--no-progress", *extra],
                   env={"OPENAI_API_KEY": KEY, **(env or {})}, cwd=tmp)


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def _model_routes(sim: SimThread) -> list[str]:
    return [h.path for h in sim.heard if h.method == "POST" and not h.path.startswith("/sim/")]


def _nowhere(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_pro_model_answers_over_responses_by_default_and_the_sdk_is_answered_alike(data, tmp_path):
    openai = pytest.importorskip("openai")
    with SimThread(_config(data, snapshot="o3-pro-2025-06-10")) as sim:
        done = _cli(sim, data, tmp_path, "openai/o3-pro")
        routes = _model_routes(sim)
        assert done.returncode == 0, done.stderr
        assert routes == ["/v1/responses"] * N  # every question, on the Responses API only
        records = _records(tmp_path / "run")
        assert [r["correct"] for r in records] == [True] * N
        assert {r["served_by"] for r in records} == {"o3-pro-2025-06-10"}  # the served snapshot, read back
        assert all(r["usage"]["input_tokens"] > 0 and r["usage"]["output_tokens"] > 0 for r in records)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["metrics"]["accuracy"] == 100.0
        # the same command again: every answer from the cache, nothing sent
        again = _cli(sim, data, tmp_path, "openai/o3-pro")
        assert again.returncode == 0 and len(_model_routes(sim)) == N

        # the real SDK, with the request shape evalkit sends (instructions, input_text, input_image, store)
        png = base64.b64encode((data.parent / "images" / "0.png").read_bytes()).decode()
        question = json.loads(data.read_text().splitlines()[0])
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key=KEY, max_retries=0)
        reply = client.responses.create(
            model="o3-pro", instructions="Answer with the option's letter.", max_output_tokens=256, store=False,
            reasoning={"effort": "high", "summary": "auto"},
            input=[{"role": "user", "content": [
                {"type": "input_image", "image_url": f"data:image/png;base64,{png}", "detail": "low"},
                {"type": "input_text", "text": records[0]["prompt"]}]}])
        assert reply.status == "completed" and reply.output_text == question["answer"]
        assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
        assert reply.model == "o3-pro-2025-06-10"
        # a chat model stays on Chat Completions, as before
        chat = _cli(sim, data, tmp_path, "openai/gpt-4o", out="chat")
        assert chat.returncode == 0, chat.stderr
        assert _model_routes(sim)[N + 1:] == ["/v1/chat/completions"] * N  # (after the SDK's one)
        # `--api chat` is the same run with the same keys and identity: nothing sent
        same = _cli(sim, data, tmp_path, "openai/gpt-4o", "--api", "chat", out="chat")
        assert same.returncode == 0 and len(_model_routes(sim)) == 2 * N + 1, same.stderr
        assert "api" not in json.loads((tmp_path / "chat" / "config.json").read_text())["identity"]
    assert _nowhere(tmp_path, KEY) == []


def test_azure_v1_responses_sends_the_key_as_api_key_only(data, tmp_path):
    with SimThread(_config(data)) as sim:
        done = run_cli(["run", "mcq", "--model", "azure/my-gpt-4-1", "--api", "responses", "--base-url", sim.url,
                        "--data", str(data), "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
                        "--no-progress"], env={"AZURE_OPENAI_API_KEY": KEY}, cwd=tmp_path)
        asked = [h for h in sim.heard if h.method == "POST"]
        assert done.returncode == 0, done.stderr
        assert [h.path for h in asked] == ["/openai/v1/responses"] * N
        assert {h.auth for h in asked} == {("api-key",)}  # never a bearer token
        assert json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]["accuracy"] == 100.0
    assert _nowhere(tmp_path, KEY) == [] and KEY not in done.stdout + done.stderr


def test_a_batch_of_responses_lines_completes_at_half_price(data, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/o3-pro": {"input": 20.0, "output": 80.0}}))
    with SimThread(_config(data)) as sim:
        done = _cli(sim, data, tmp_path, "openai/o3-pro", "--batch", "--prices", str(prices))
        assert done.returncode == 0, done.stderr
        lines = [json.loads(x) for f in sim.batches.files.values() for x in f.decode().splitlines()
                 if x.strip() and '"method"' in x]  # the input file's lines
        assert len(lines) == N and {x["url"] for x in lines} == {"/v1/responses"}
        assert all(x["body"]["store"] is False and "input" in x["body"] for x in lines)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    usage = summary["usage"]
    assert summary["metrics"]["accuracy"] == 100.0
    assert usage["cost_usd"] > 0 and usage["cost_usd"] == pytest.approx(usage["cost_live_usd"] / 2)
    assert {r["via"] for r in _records(tmp_path / "run")} == {"batch"}


_SAME = ("response", "parsed", "correct", "refusal", "error", "error_message", "finish_reason")


def _outcomes(tmp: Path, data: Path, config: SimConfig, route: str, **kw) -> list[dict]:
    with SimThread(config) as sim:
        result = evalkit.run("mcq", "openai/o4-mini", data=str(data), base_url=sim.url + "/v1", api=route,
                             env={"OPENAI_API_KEY": KEY}, out=str(tmp / route), cache_dir=str(tmp / f"cache-{route}"),
                             progress=False, plots=False, quiet=True, max_attempts=1, **kw)
        heard = {h.path for h in sim.heard if h.method == "POST"}
    assert heard == {"/v1/responses" if route == "responses" else "/v1/chat/completions"}, result.messages
    return [{k: r.get(k) for k in _SAME} | r["usage"] for r in _records(tmp / route)]


def test_cut_offs_and_refusals_are_recorded_as_on_chat_completions(data, tmp_path):
    # thinking longer than --max-tokens: cut off before any answer (chat: finish "length"; Responses: incomplete)
    thinker = _config(data, think_tokens=400)
    cut = {route: _outcomes(tmp_path / "cut", data, thinker, route, reasoning_effort="high", max_tokens=100)
           for route in ("chat", "responses")}
    assert cut["chat"] == cut["responses"]
    assert [(r["finish_reason"], r["response"], r["correct"]) for r in cut["chat"]] == [("length", "", False)] * N
    assert all(r["reasoning_tokens"] == 100 and r["output_tokens"] == 100 for r in cut["chat"])
    # the content filter on every request (chat: finish "content_filter"; Responses: incomplete, content_filter)
    filtered = _config(data, faults=SimFaults(rate=1.0, kinds=("refusal",)))
    refused = {route: _outcomes(tmp_path / "refused", data, filtered, route) for route in ("chat", "responses")}
    assert refused["chat"] == refused["responses"]
    assert {(r["error"], r["error_message"]) for r in refused["chat"]} == {("refused", "content refused (content_filter)")}


def test_a_chat_request_for_a_responses_only_model_is_one_line_naming_the_flag(data, tmp_path):
    with SimThread(_config(data)) as sim:
        done = _cli(sim, data, tmp_path, "openai/o3-pro", "--api", "chat")
        routes = _model_routes(sim)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out
    assert routes and set(routes) == {"/v1/chat/completions"}  # the first request confirms it, then stops
    lines = [x for x in out.splitlines() if "--api responses" in x]
    assert len(lines) == 1 and "only supported in v1/responses" in lines[0]


def test_an_openai_compatible_server_gets_the_same_request_with_the_flag_and_chat_without(data, tmp_path):
    with SimThread(_config(data)) as sim:
        flagged = _cli(sim, data, tmp_path, "openai-compatible/sim-model", "--api", "responses", out="resp")
        plain = _cli(sim, data, tmp_path, "openai-compatible/sim-model", out="chat")
        routes = _model_routes(sim)
    assert flagged.returncode == 0 and plain.returncode == 0, flagged.stderr + plain.stderr
    assert routes == ["/v1/responses"] * N + ["/v1/chat/completions"] * N  # another route: asked again, not cached
    identity = json.loads((tmp_path / "resp" / "config.json").read_text())["identity"]
    assert identity["api"] == "responses"
    assert "api" not in json.loads((tmp_path / "chat" / "config.json").read_text())["identity"]


def test_a_responses_run_and_a_chat_run_compare_with_the_route_noted(data, tmp_path):
    with SimThread(_config(data)) as sim:
        pro = _cli(sim, data, tmp_path, "openai/o3-pro", out="pro")
        chat = _cli(sim, data, tmp_path, "openai/gpt-4o", out="chat")
    assert pro.returncode == chat.returncode == 0, pro.stderr + chat.stderr
    compared = run_cli(["compare", str(tmp_path / "pro"), str(tmp_path / "chat"), "--out", str(tmp_path / "cmp")],
                       cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "api differs between models: openai/o3-pro: responses, openai/gpt-4o: None" in report


def test_a_service_tier_is_sent_and_read_back_as_on_chat_completions(data, tmp_path):
    seen = {}
    with SimThread(_config(data)) as sim:
        for route in ("chat", "responses"):
            result = evalkit.run("mcq", "openai/o3", data=str(data), base_url=sim.url + "/v1", api=route,
                                 env={"OPENAI_API_KEY": KEY}, out=str(tmp_path / route), service_tier="flex",
                                 cache_dir=str(tmp_path / "cache"), progress=False, plots=False, quiet=True)
            assert result.exit_code == 0, result.messages
            seen[route] = ([r["served_tier"] for r in _records(tmp_path / route)], result.summary["service_tier"],
                           result.summary["usage"]["cost_usd"])
        routes = _model_routes(sim)
    assert routes == ["/v1/chat/completions"] * N + ["/v1/responses"] * N  # another route: not the chat answers
    assert seen["chat"] == seen["responses"]
    assert seen["responses"][:2] == (["flex"] * N, {"requested": "flex", "served": {"flex": N}})


def test_api_responses_for_a_provider_without_it_is_one_line_before_anything_is_sent(data, tmp_path):
    done = run_cli(["run", "mcq", "--model", "anthropic/claude-sonnet-4-5", "--api", "responses", "--data", str(data),
                    "--out", str(tmp_path / "run"), "--no-progress"], env={"ANTHROPIC_API_KEY": KEY}, cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    assert done.stderr.strip().splitlines()[-1] == ("evalkit: error: --api responses is for openai/, openai-compatible/, "
                                                   "azure/ models, not --model anthropic/claude-sonnet-4-5")
