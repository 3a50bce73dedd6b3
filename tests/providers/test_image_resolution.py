"""`--detail` and `--media-resolution` (issue 45, item 2), through the `evalkit` command against the simulator:
the setting is on the wire (what the simulator heard), in the cache key and the run directory when given and
absent otherwise (`--detail auto` is no flag: the same run, nothing sent again); the dry run prices the same
images by each model family's documented formula; a provider with no such setting refuses the flag in one
line before anything is sent.

Self-contained (its data and images are drawn here), so the same file runs on an older evalkit.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from cli_under_test import run_cli
from PIL import Image

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

KEY = "sk-test-detail-0001"
N = 4
# ten images whose sizes exercise every branch of the formulas (fit to 2048, shortest side to 768, the
# 1536-patch cap and its scaling down, a small image)
SIZES = [(1024, 1024), (2048, 4096), (1800, 2400), (512, 512), (100, 60), (3000, 1000), (800, 600),
         (1536, 768), (4000, 3000), (700, 1400)]


def _data(folder: Path, sizes: list[tuple[int, int]]) -> Path:
    """One four-option question per image, in evalkit's JSONL MCQ form."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (w, h) in enumerate(sizes):
        name = f"images/img{i}.png"
        Image.new("RGB", (w, h), (40 * i % 256, 90, 200)).save(folder / name)
        lines.append({"id": f"q{i}", "image": name, "question": "Which colour dominates?",
                      "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "C"})
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _openai(sim: SimThread, data: Path, tmp: Path, out: str, *more: str, model: str = "openai/gpt-4o"):
    return run_cli(["run", "mcq", "--model", model, "--data", str(data), "--base-url", sim.url + "/v1",
                     "--out", str(tmp / out), "--cache-dir", str(tmp / "cache"), "--no-progress", *more],
                    env={"OPENAI_API_KEY": KEY})


def _chats(sim: SimThread) -> list:
    return [h for h in sim.heard if h.path.endswith("/chat/completions")]


def _keys(rundir: Path) -> set[str]:
    return {json.loads(line)["request_key"] for line in (rundir / "records.jsonl").read_text().splitlines()}


def test_detail_low_is_sent_and_is_another_run(tmp_path):
    data = _data(tmp_path / "ds", [(96, 96)] * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        plain = _openai(sim, data, tmp_path, "plain")
        plain_heard = _chats(sim)
        low = _openai(sim, data, tmp_path, "low", "--detail", "low")
        low_heard = _chats(sim)[len(plain_heard):]
        auto = _openai(sim, data, tmp_path, "plain", "--detail", "auto")  # the same run as no flag
        after_auto = _chats(sim)[len(plain_heard) + len(low_heard):]
    assert plain.returncode == low.returncode == auto.returncode == 0, (plain.stderr, low.stderr, auto.stderr)
    assert len(plain_heard) == N and not any(any(h.image_detail) for h in plain_heard)  # no detail sent
    assert len(low_heard) == N and all(h.image_detail == ("low",) for h in low_heard)  # not the cache's answers
    assert after_auto == [], "--detail auto is no flag: its answers are the plain run's, nothing sent"
    assert _keys(tmp_path / "plain").isdisjoint(_keys(tmp_path / "low"))
    low_config = json.loads((tmp_path / "low" / "config.json").read_text())
    plain_config = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert low_config["identity"]["detail"] == "low" and low_config["config"]["generation"]["detail"] == "low"
    assert "detail" not in plain_config["identity"] and "detail" not in plain_config["config"]["generation"]


def test_default_run_directories_follow_the_identity(tmp_path):
    data = _data(tmp_path / "ds", [(96, 96)] * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        def run(*more: str):
            return run_cli(["run", "mcq", "--model", "openai/gpt-4o", "--data", str(data), "--base-url",
                             sim.url + "/v1", "--cache-dir", str(tmp_path / "cache"), "--no-progress", *more],
                            env={"OPENAI_API_KEY": KEY}, cwd=tmp_path)
        results = [run(), run("--detail", "auto"), run("--detail", "low"), run("--detail", "high")]
        sent = len(_chats(sim))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    dirs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(dirs) == 3, dirs  # no flag and auto share one; low and high have their own
    assert sent == 3 * N  # auto sent nothing: its run was complete


def _tiles(w: int, h: int, base: int = 85, tile: int = 170) -> int:
    """The guide's tile rule, worked by hand: fit 2048, shortest side to 768, 512-px squares."""
    s = min(1.0, 2048 / max(w, h))
    w2, h2 = w * s, h * s
    s = min(1.0, 768 / min(w2, h2))
    return base + tile * math.ceil(w2 * s / 512) * math.ceil(h2 * s / 512)


def _patches(w: int, h: int) -> int:
    """The guide's patch rule, worked by hand (its steps A-C)."""
    n = math.ceil(w / 32) * math.ceil(h / 32)
    if n <= 1536:
        return n
    r = math.sqrt(32 * 32 * 1536 / (w * h))
    r *= min(math.floor(w * r / 32) / (w * r / 32), math.floor(h * r / 32) / (h * r / 32))
    return math.ceil(round(w * r, 6) / 32) * math.ceil(round(h * r, 6) / 32)


# the guide's worked examples, as the hand rules above give them
assert _tiles(1024, 1024) == 765 and _tiles(2048, 4096) == 1105
assert _patches(1024, 1024) == 1024 and _patches(1800, 2400) == 1452


def _dry(tmp: Path, data: Path, model: str, *more: str) -> dict[str, float]:
    """The dry run's estimate as it prints it: input tokens, and the cost's high end."""
    result = run_cli(["run", "mcq", "--model", model, "--data", str(data), "--dry-run",
                       "--cache-dir", str(tmp / "cache"), *more], env={"OPENAI_API_KEY": KEY, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    tokens = re.search(r"input tokens \(est\.\)\s*\W\s*([\d,]+)", shown)
    cost = re.search(r"cost \(est\.\)\s*\W\s*\$[\d.,]+ – \$([\d.,]+)", shown)
    assert tokens and cost, shown
    return {"input_tokens": int(tokens.group(1).replace(",", "")), "cost_high_usd": float(cost.group(1))}


@pytest.fixture
def ten_images(tmp_path: Path) -> Path:
    return _data(tmp_path / "ten", SIZES)


def test_the_dry_run_prices_each_model_family_by_its_formula(tmp_path, ten_images):
    tiles = sum(_tiles(w, h) for w, h in SIZES)
    patches_mini = sum(math.ceil(_patches(w, h) * 1.62) for w, h in SIZES)
    assert (tiles, patches_mini) == (8330, 15714)  # the figures the rules give for these ten sizes
    gpt4o = _dry(tmp_path, ten_images, "openai/gpt-4o")
    mini = _dry(tmp_path, ten_images, "openai/gpt-4.1-mini")
    text = gpt4o["input_tokens"] - tiles  # the same questions' text for every model
    assert text > 0
    assert mini["input_tokens"] == text + patches_mini  # patches x 1.62, not tiles
    low = _dry(tmp_path, ten_images, "openai/gpt-4o", "--detail", "low")
    mini_low = _dry(tmp_path, ten_images, "openai/gpt-4.1-mini", "--detail", "low")
    assert low["input_tokens"] == text + 85 * len(SIZES)  # low: the base alone, whatever the size
    assert mini_low["input_tokens"] == mini["input_tokens"]  # low changes nothing on a patch model
    # priced at each model's own rate: the cost follows the tokens
    assert low["cost_high_usd"] < gpt4o["cost_high_usd"]


def test_media_resolution_is_sent_in_the_generation_config(tmp_path):
    data = _data(tmp_path / "ds", [(96, 96)] * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        def run(out: str, *more: str):
            return run_cli(["run", "mcq", "--model", "google/gemini-2.5-flash", "--data", str(data), "--out",
                             str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), "--no-progress", *more],
                            env={"GEMINI_API_KEY": KEY, "GEMINI_BASE_URL": sim.url})
        plain, low = run("plain"), run("low", "--media-resolution", "low")
        heard = [h for h in sim.heard if h.path.endswith(":generateContent")]
    assert plain.returncode == low.returncode == 0, (plain.stderr, low.stderr)
    assert [h.media_resolution for h in heard] == [None] * N + ["MEDIA_RESOLUTION_LOW"] * N
    records = [json.loads(x) for x in (tmp_path / "low" / "records.jsonl").read_text().splitlines()]
    plain_records = [json.loads(x) for x in (tmp_path / "plain" / "records.jsonl").read_text().splitlines()]
    # the server counted each image at MEDIA_RESOLUTION_LOW's 64 tokens (Gemini 2.x), not its default
    assert {p["usage"]["input_tokens"] - r["usage"]["input_tokens"] for p, r in zip(
        sorted(plain_records, key=lambda r: r["query_id"]), sorted(records, key=lambda r: r["query_id"]),
        strict=True)} == {255 - 64}


@pytest.mark.parametrize(("model", "flag", "env"), [
    ("anthropic/claude-sonnet-4-5", "--detail", {"ANTHROPIC_API_KEY": KEY}),
    ("openai/gpt-4o", "--media-resolution", {"OPENAI_API_KEY": KEY}),
])
def test_a_provider_without_the_setting_refuses_it_in_one_line(tmp_path, model, flag, env):
    data = _data(tmp_path / "ds", [(96, 96)] * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        url = {"ANTHROPIC_BASE_URL": sim.url} if model.startswith("anthropic/") else {}
        base = ["--base-url", sim.url + "/v1"] if model.startswith("openai/") else []
        result = run_cli(["run", "mcq", "--model", model, "--data", str(data), *base, "--out",
                           str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                           flag, "low"], env={**env, **url})
        heard = [h for h in sim.heard if h.method == "POST"]
    assert result.returncode == 2, result.stderr
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and flag in lines[0] and model.split("/")[0] + "/" in lines[0], result.stderr
    assert "no such setting" in lines[0]
    assert heard == [] and not (tmp_path / "run").exists()


def test_a_self_hosted_server_is_sent_the_detail_with_a_note(tmp_path):
    data = _data(tmp_path / "ds", [(96, 96)] * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        result = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--base-url",
                           sim.url + "/v1", "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
                           "--no-progress", "--detail", "high"])
        heard = _chats(sim)
    assert result.returncode == 0, result.stderr
    notes = [x for x in result.stderr.splitlines() if "--detail high" in x]
    assert len(notes) == 1 and "may ignore it" in notes[0]
    assert len(heard) == N and all(h.image_detail == ("high",) for h in heard)


def _usage(rundir: Path) -> dict[str, int]:
    return {r["query_id"]: r["usage"]["input_tokens"]
            for r in map(json.loads, (rundir / "records.jsonl").read_text().splitlines())}


def test_the_simulator_reports_image_tokens_by_family_and_setting(tmp_path):
    """Usage as the services count it: gpt-4o at detail low is 85 an image, gpt-4.1-mini 1024 patches x 1.62
    for a 1024 x 1024 image whatever the detail, Gemini 3 at MEDIUM 560 and at LOW 280."""
    data = _data(tmp_path / "ds", [(1024, 1024)] * 2)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        low = _openai(sim, data, tmp_path, "4o-low", "--detail", "low")
        mini = _openai(sim, data, tmp_path, "mini-low", "--detail", "low", model="openai/gpt-4.1-mini")

        def gemini(out: str, level: str):
            return run_cli(["run", "mcq", "--model", "google/gemini-3-flash-preview", "--data", str(data), "--out",
                            str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                            "--media-resolution", level], env={"GEMINI_API_KEY": KEY, "GEMINI_BASE_URL": sim.url})
        medium, g_low = gemini("g-medium", "medium"), gemini("g-low", "low")
    assert all(r.returncode == 0 for r in (low, mini, medium, g_low)), [r.stderr for r in (low, mini, medium, g_low)]
    four_o, four_mini = _usage(tmp_path / "4o-low"), _usage(tmp_path / "mini-low")
    assert {four_mini[q] - four_o[q] for q in four_o} == {math.ceil(1024 * 1.62) - 85}
    g_medium, g_lowest = _usage(tmp_path / "g-medium"), _usage(tmp_path / "g-low")
    assert {g_medium[q] - g_lowest[q] for q in g_medium} == {560 - 280}
