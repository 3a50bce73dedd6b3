"""`evalkit run mcq --model A --model B --until-decided` against two simulators whose models differ clearly
(issue 46, item 2): both runs stop early (each server answers fewer than the set's 1,000 questions),
the leaderboard says the pair was decided and at how many items, and the same command again sends
nothing. `--width` decides two models that always agree by their difference's interval. One model,
or `--limit`, is refused in one line (exit 2).

Self-contained (its own data, the simulator's public names), so the same file runs on evalkit 0.3.0.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from evalkit.cli import main
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

N = 1000


def _questions(folder: Path, n: int = N) -> Path:
    """n four-option questions on one small picture, in three categories (the strata of the order)."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 16), (30, 140, 200)).save(folder / "images" / "one.png")
    rows = [{"id": f"q{i:04d}", "image": "images/one.png", "question": f"Question {i}: which colour is it?",
             "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"}, "answer": "ABCD"[i * 7 % 4],
             "category": f"cat{i % 3}"} for i in range(n)]
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@contextlib.contextmanager
def _two_sims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strong: float, weak: float):
    """vllm/sim-model and openai/sim-model, each on its own simulator, knowing a share `strong` and `weak` of
    the questions (right on those, guessing on the rest: about 25 % + 75 % of the share)."""
    data = _questions(tmp_path / "d")
    key = answer_key_for("mcq", {"data": str(data)})
    a = SimThread(SimConfig(answer_key=key, params=SimParams(theta=strong, r=1.0))).start()
    b = SimThread(SimConfig(answer_key=key, params=SimParams(theta=weak, r=1.0))).start()
    monkeypatch.setenv("VLLM_BASE_URL", a.url)
    monkeypatch.setenv("OPENAI_BASE_URL", b.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sim")
    try:
        yield data, a, b
    finally:
        a.close()
        b.close()


@pytest.fixture
def two_models(tmp_path, monkeypatch):
    """A strong model (vllm/, about 96 % right) and a weak one (openai/, about 66 %)."""
    with _two_sims(tmp_path, monkeypatch, 0.95, 0.55) as sims:
        yield sims


@pytest.fixture
def closer_models(tmp_path, monkeypatch):
    """Two models about 11 points apart (77.5 % and 66 %): a few dozen items do not tell them apart."""
    with _two_sims(tmp_path, monkeypatch, 0.70, 0.55) as sims:
        yield sims


def _argv(data: Path, tmp_path: Path, *more: str) -> list[str]:
    return ["run", "mcq", "--model", "vllm/sim-model", "--model", "openai/sim-model", "--data", str(data),
            "--out", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--no-plots",
            "--concurrency", "8", *more]


def test_two_clearly_different_models_stop_once_their_pair_is_decided_and_again_send_nothing(
        two_models, tmp_path, capfd):
    data, strong, weak = two_models
    first = main(_argv(data, tmp_path, "--until-decided"))
    said = capfd.readouterr()
    asked = (strong.counters.completions, weak.counters.completions)
    assert first == 0, said.err
    assert 0 < asked[0] < N and 0 < asked[1] < N, asked  # both stopped early
    comparison = json.loads((tmp_path / "m" / "compare-mcq" / "comparison.json").read_text())
    [pair] = comparison["until_decided"]
    assert {pair["a"], pair["b"]} == {"vllm/sim-model", "openai/sim-model"}
    assert pair["decided"] == "test" and 0 < pair["at"] <= min(asked) and pair["of"] == N
    assert abs(pair["difference"]) > 15 and pair["p_value"] <= 0.05
    assert f"decided at {pair['at']:,} items" in said.out
    assert said.out.count(f"of {N:,} items: every pair decided") == 4  # each run's line, and the comparison's note on it
    report = (tmp_path / "m" / "compare-mcq" / "report.md").read_text()
    assert "## Until decided" in report and f"decided at {pair['at']:,} items (sequential test, Holm)" in report
    for run in (tmp_path / "m").glob("mcq-*"):
        summary = json.loads((run / "summary.json").read_text())
        block = summary["sample"]
        assert block["rule"] == "until-decided" and block["of"] == N and block["items"] < N
        assert summary["stopped"] == "sample" and summary["complete"] is False
        assert [p["decided"] for p in block["pairs"]] == ["test"]
        first_line = (run / "report.md").read_text().splitlines()[0]
        assert re.search(rf"stopped at [\d,]+ of {N:,} items: every pair decided", first_line), first_line
    again = main(_argv(data, tmp_path, "--until-decided"))
    said_again = capfd.readouterr()
    assert again == 0, said_again.err
    assert (strong.counters.completions, weak.counters.completions) == asked  # nothing sent
    assert json.loads((tmp_path / "m" / "compare-mcq" / "comparison.json").read_text())["until_decided"] == [pair]


def test_width_decides_two_models_that_always_agree(tmp_path, monkeypatch, capfd):
    data = _questions(tmp_path / "d", 400)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.7, r=1.0))) as sim:
        monkeypatch.setenv("VLLM_BASE_URL", sim.url)
        code = main(["run", "mcq", "--model", "vllm/sim-model", "--model", "vllm/twin-model", "--data", str(data),
                     "--out", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                     "--no-plots", "--concurrency", "4", "--until-decided", "--width", "15"])
        asked = sim.counters.completions
    said = capfd.readouterr()
    assert code == 0, said.err
    [pair] = json.loads((tmp_path / "m" / "compare-mcq" / "comparison.json").read_text())["until_decided"]
    assert pair["decided"] == "width" and pair["difference"] == 0
    assert (pair["interval"][1] - pair["interval"][0]) / 2 <= 15
    assert asked < 2 * 400  # both stopped before the whole set
    assert "interval within ±W" in said.out


def test_one_model_or_a_limit_is_refused_in_one_line(tmp_path, capfd):
    data = _questions(tmp_path / "d", 10)
    one = main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9", "--data", str(data),
                "--out", str(tmp_path / "one"), "--until-decided"])
    said = capfd.readouterr()
    assert one == 2 and "--until-decided compares models" in said.err, said.err
    limited = main(_argv(data, tmp_path, "--until-decided", "--limit", "5"))
    said = capfd.readouterr()
    assert limited == 2 and "--limit and --until-decided cannot go together" in said.err, said.err
    assert not (tmp_path / "one").exists() and not (tmp_path / "m").exists()  # refused before anything was written


def _records(run: Path) -> list[str]:
    return [json.loads(line)["query_id"] for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]


def test_compare_continue_goes_on_from_two_until_ci_runs_to_a_decision_asking_only_new_items(
        closer_models, tmp_path, capfd):
    data, strong, weak = closer_models
    runs = {"vllm/sim-model": tmp_path / "a", "openai/sim-model": tmp_path / "b"}
    for model, out in runs.items():  # each run alone, stopped at its own interval: ±45 points
        code = main(["run", "mcq", "--model", model, "--data", str(data), "--out", str(out), "--cache-dir",
                     str(tmp_path / "cache"), "--no-progress", "--no-plots", "--concurrency", "4", "--until-ci", "45"])
        assert code == 0, capfd.readouterr().err
    capfd.readouterr()
    before = {m: set(_records(out)) for m, out in runs.items()}
    asked = (strong.counters.completions, weak.counters.completions)
    assert asked == (len(before["vllm/sim-model"]), len(before["openai/sim-model"])) and max(asked) < N
    code = main(["compare", "--continue", str(runs["vllm/sim-model"]), str(runs["openai/sim-model"]), "--out",
                 str(tmp_path / "cmp"), "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--no-plots"])
    said = capfd.readouterr()
    assert code == 0, said.err
    after = {m: _records(out) for m, out in runs.items()}
    for m in runs:
        assert len(after[m]) == len(set(after[m])) and before[m] <= set(after[m])  # kept, none asked twice
    sent = (strong.counters.completions - asked[0], weak.counters.completions - asked[1])
    assert sent == (len(after["vllm/sim-model"]) - len(before["vllm/sim-model"]),
                    len(after["openai/sim-model"]) - len(before["openai/sim-model"]))  # only new items were sent
    assert min(sent) > 0 and max(len(a) for a in after.values()) < N  # both went on, and stopped early
    [pair] = json.loads((tmp_path / "cmp" / "comparison.json").read_text())["until_decided"]
    assert pair["decided"] == "test" and pair["at"] <= min(len(a) for a in after.values())
    assert f"decided at {pair['at']:,} items" in said.out
    for out in runs.values():
        assert json.loads((out / "summary.json").read_text())["sample"]["rule"] == "until-decided"


def test_compare_continue_refuses_runs_not_on_the_same_items_in_one_line(tmp_path, capfd):
    small, other = _questions(tmp_path / "d1", 6), _questions(tmp_path / "d2", 8)
    key = answer_key_for("mcq", {"data": str(small)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        for data, out in ((small, "a"), (other, "b")):
            code = main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                         "--out", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                         "--no-plots"])
            assert code == 0, capfd.readouterr().err
        capfd.readouterr()
        code = main(["compare", "--continue", str(tmp_path / "a"), str(tmp_path / "b")])
    said = capfd.readouterr()
    assert code == 2, said
    [line] = [x for x in said.err.splitlines() if x.strip()]
    assert "are not on the same items" in line and str(tmp_path / "a") in line and str(tmp_path / "b") in line
