"""`--until-ci W` end to end against the simulator (issue 46, items 1 and 3 for one run): the run asks a
seeded random sample (whole variant groups), stops once the headline's 95 % interval is +-W, says so (summary.json's
"sample" block, report.md's first line, the console), and the same command with a smaller W, or without the
flag, continues in the same run directory with no answer asked twice.

Through the public surface only (the `evalkit` command, `evalkit.run`, the simulator's names), so this file
runs unchanged on evalkit 0.3.0, where every test fails: the flag is unknown there.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from cli_under_test import run_cli
from PIL import Image

import evalkit
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

N = 2000
SHARES = {"ocr": 0.5, "chart": 0.3, "scene": 0.2}
COLOURS = {"A": "red", "B": "green", "C": "blue", "D": "yellow"}


def _category(i: int) -> str:
    return "ocr" if i % 10 < 5 else "chart" if i % 10 < 8 else "scene"


def _data(folder: Path, n: int) -> Path:
    """n four-option questions in three categories (50/30/20 %) over four tiny images (hashed once)."""
    (folder / "images").mkdir(parents=True)
    for k, rgb in enumerate(((200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30))):
        Image.new("RGB", (16, 16), rgb).save(folder / f"images/i{k}.png")
    rows = [{"id": f"q{i:05d}", "image": f"images/i{i % 4}.png", "question": f"Q{i}: which colour?",
             "options": COLOURS, "answer": "ABCD"[(i * 7) % 4], "category": _category(i)} for i in range(n)]
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return _data(tmp_path_factory.mktemp("until_ci"), N)


@pytest.fixture(scope="module")
def sim(data):
    # about 93 % of the questions known, the rest guessed: accuracy near 0.95
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.93, seed=3))) as server:
        yield server


def _cli(sim, data: Path, out: Path, *flags: str):
    return run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                    "--out", str(out), "--cache-dir", str(out.parent / "cache"), "--no-progress", *flags])


def _api(sim, data: Path, out: Path, **options):
    return evalkit.run("mcq", "vllm/sim-model", base_url=sim.url, data=str(data), out=str(out),
                       cache_dir=str(out.parent / "cache"), quiet=True, plots=False, **options)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines() if line]


def _per_key(sim) -> dict[str, int]:
    return sim.counters.snapshot()["per_key"]


def _asked_twice(sim, before: dict[str, int]) -> int:
    """Requests answered more than once since `before` (the server is shared by this file's tests)."""
    return sum(n - before.get(key, 0) > 1 for key, n in _per_key(sim).items())


def test_until_ci_stops_early_and_the_same_command_without_it_completes_the_set(tmp_path, sim, data):
    out = tmp_path / "run"
    before, keys = sim.counters.snapshot()["requests"], _per_key(sim)
    done = _cli(sim, data, out, "--until-ci", "3")
    sent = sim.counters.snapshot()["requests"] - before
    assert done.returncode == 0, done.stderr
    assert 0 < sent < N  # stopped early
    summary = _summary(out)
    block = summary["sample"]
    assert summary["stopped"] == "sample" and summary["complete"] is False
    assert block["rule"] == "until-ci" and block["of"] == N and block["items"] < N and block["seed"] == 0
    assert block["asked"] == sent and block["items"] <= block["asked"]
    assert block["target"] == 3.0 and block["level"] == 0.95 and block["metric"] == "accuracy"
    assert block["half_width"] <= 3.0
    low, high = block["interval"]
    assert low <= block["estimate"] <= high and high - low == pytest.approx(2 * block["half_width"], abs=1e-5)
    assert sum(s["items"] for s in block["strata"].values()) == block["items"]
    assert {k: s["of"] for k, s in block["strata"].items()} == {k: int(v * N) for k, v in SHARES.items()}
    assert block["schedule"] == [{"target": 0.03, "from": {}}]
    first = (out / "report.md").read_text(encoding="utf-8").splitlines()[0]
    assert first == f"stopped at {block['items']:,} of {N:,} items: ±{block['half_width']:.1f} points (95 %; asked ±3)"
    assert first in done.stdout + done.stderr  # the console says it too
    report = (out / "report.md").read_text(encoding="utf-8")
    interval_line = f"95 % interval [{low:.2f}, {high:.2f}] (time-uniform"
    assert interval_line in report and interval_line in done.stdout + done.stderr
    assert "bootstrap" not in report.split("## Counts")[0]  # not an interval for a fixed-size sample

    # the order is a random sample of the set: each category asked in its share, within the sampling spread
    asked = Counter(r["category"] for r in _records(out))
    assert sum(asked.values()) == sent
    for name, share in SHARES.items():
        spread = math.sqrt(sent * share * (1 - share) * (N - sent) / (N - 1))  # hypergeometric sd
        assert abs(asked[name] - share * sent) <= 4 * spread + 1, (name, asked, sent)

    reported = run_cli(["report", str(out)])  # `evalkit report` recomputes the block from the records
    assert reported.returncode == 0, reported.stderr
    assert _summary(out)["sample"] == block and _summary(out)["stopped"] == "sample"
    assert (out / "report.md").read_text(encoding="utf-8").splitlines()[0] == first

    again = _cli(sim, data, out)  # the same command without --until-ci: toward the whole set
    assert again.returncode == 0, again.stderr
    assert sim.counters.snapshot()["requests"] - before == N  # exactly the queries not asked before
    assert _asked_twice(sim, keys) == 0
    summary = _summary(out)
    assert "sample" not in summary and summary["complete"] is True and summary.get("stopped") is None
    assert summary["this_run"]["sent"] == N - sent and len(_records(out)) == N
    assert not (out / "report.md").read_text(encoding="utf-8").startswith("stopped at")


def test_a_smaller_width_asks_only_new_items_and_replays_the_bets(tmp_path, sim, data):
    out = tmp_path / "run"
    before, keys = sim.counters.snapshot()["requests"], _per_key(sim)
    wide = _api(sim, data, out, until_ci=3)  # the Python API returns the summary with the block
    first = wide.summary["sample"]
    assert wide.exit_code == 0 and first["half_width"] <= 3.0 and first["items"] < N
    narrow = _api(sim, data, out, until_ci=2)
    block = narrow.summary["sample"]
    sent = sim.counters.snapshot()["requests"] - before
    assert narrow.exit_code == 0 and narrow.summary["stopped"] == "sample"
    assert narrow.summary["this_run"]["sent"] == sent - wide.summary["this_run"]["sent"] > 0  # only new items
    assert _asked_twice(sim, keys) == 0 and block["asked"] == sent < N
    assert block["half_width"] <= 2.0
    assert first["items"] < block["items"] < N
    # the schedule: the first run's bets as they were, then the new target from where they stopped
    assert block["schedule"] == [{"target": 0.03, "from": {}},
                                 {"target": 0.02, "from": {k: s["items"] for k, s in first["strata"].items()}}]
    low, high = block["interval"]
    assert low <= block["estimate"] <= high
    # the same command again: nothing to ask, the same interval (the sequence is recomputed from the records)
    same = _api(sim, data, out, until_ci=2)
    assert same.summary["this_run"]["sent"] == 0 and same.summary["sample"] == block


def test_limit_with_until_ci_is_refused_in_one_line(tmp_path, sim, data):
    done = _cli(sim, data, tmp_path / "run", "--limit", "10", "--until-ci", "3")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--limit" in lines[0] and "--until-ci" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()


def test_repeats_count_each_group_once(tmp_path, sim, data):
    out = tmp_path / "run"
    done = _api(sim, data, out, until_ci=5, repeats=2)
    block = done.summary["sample"]
    assert done.exit_code == 0 and block["of"] == N  # groups, not queries (2 x N)
    records = _records(out)
    per_item = Counter(r["item_id"] for r in records)
    assert block["asked"] == len(per_item) < N
    assert sum(n == 2 for n in per_item.values()) >= block["items"]  # a group in the interval has both repeats
    assert block["half_width"] <= 5.0


def test_each_shard_stops_on_its_own_groups(tmp_path, sim, data):
    out = tmp_path / "shard"
    done = _api(sim, data, out, until_ci=4, shard="1/2")
    block = done.summary["sample"]
    assert done.exit_code == 0 and done.summary["stopped"] == "sample"
    assert block["of"] == done.summary["n_items"] < N  # the shard's groups
    assert block["half_width"] <= 4.0 and block["asked"] < block["of"]


def test_batch_sends_the_sample_in_waves_and_checks_between_them(tmp_path):
    data = _data(tmp_path / "small", 200)
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as server:
        done = evalkit.run("mcq", "openai/sim-model", base_url=server.url + "/v1", data=str(data), out=str(out),
                           cache_dir=str(tmp_path / "cache"), env={"OPENAI_API_KEY": "sk-test"}, batch=True,
                           until_ci=20, quiet=True, plots=False)
        lines = server.batches.counts["lines"]
    block = done.summary["sample"]
    assert done.exit_code == 0 and done.summary["stopped"] == "sample"
    batches = done.summary["batches"]["batches"]
    assert len(batches) >= 2 and all(b["requests"] == 10 for b in batches)  # waves of 5 % of 200 items
    assert lines == block["asked"] == 10 * len(batches) < 200
    assert block["half_width"] <= 20.0


def test_a_dry_run_prices_the_whole_set_and_says_the_sample_may_stop_earlier(tmp_path, sim, data):
    before = sim.counters.snapshot()["requests"]
    plan = _api(sim, data, tmp_path / "run", until_ci=3, dry_run=True).summary["dry_run"]
    assert sim.counters.snapshot()["requests"] == before  # nothing sent
    assert plan["to_send"] == N
    assert any("--until-ci 3" in note and "earlier" in note for note in plan["notes"]), plan["notes"]


def test_the_sample_seed_sets_the_order(tmp_path):
    data = _data(tmp_path / "small", 200)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as server:
        def asked(name: str, seed: int) -> tuple[set[str], dict]:
            out = tmp_path / name
            done = evalkit.run("mcq", "vllm/sim-model", base_url=server.url, data=str(data), out=str(out),
                               cache_dir=str(tmp_path / f"cache-{name}"), until_ci=25, sample_seed=seed,
                               quiet=True, plots=False)
            assert done.exit_code == 0 and done.summary["stopped"] == "sample"
            return {r["item_id"] for r in _records(out)}, done.summary["sample"]

        (a, block_a), (b, _), (c, block_c) = asked("a", 0), asked("b", 0), asked("c", 7)
    assert block_a["seed"] == 0 and block_c["seed"] == 7
    from types import SimpleNamespace

    from evalkit.engine.until.order import sample_order

    rows = [SimpleNamespace(base_id=r["id"], category=r["category"])
            for r in map(json.loads, data.read_text(encoding="utf-8").splitlines())]
    orders = {seed: sample_order(rows, seed).sequence for seed in (0, 7)}

    def fits(items: set[str], seed: int) -> bool:
        """Every item asked lies near the front of the seed's order: within the items asked plus what a
        stop leaves in flight (at most one query per worker: 2 x --concurrency 32), wherever it stopped."""
        place = {g: i for i, g in enumerate(orders[seed])}
        return max(place[g] for g in items) < len(items) + 64

    assert fits(a, 0) and fits(b, 0) and fits(c, 7)  # each run asked the front of its seed's order
    assert not fits(c, 0) and not fits(a, 7)  # and another seed's order is another sample


def test_a_macro_headline_is_sampled_in_its_own_scale_and_weights(tmp_path):
    # TDBench's RE: the mean over its categories of a fraction; the interval is for that number
    with SimThread(SimConfig(answer_key=answer_key_for("tdbench", {"data": "sample"}))) as server:
        done = evalkit.run("tdbench", "vllm/sim-model", base_url=server.url, data="sample", out=str(tmp_path / "td"),
                           cache_dir=str(tmp_path / "cache"), until_ci=60, quiet=True, plots=False)
    block = done.summary["sample"]
    assert done.exit_code == 0 and done.summary["stopped"] == "sample"
    assert block["metric"] == "RE" and block["scale"] == 1.0 and "note" not in block
    assert block["half_width"] <= 0.6 and block["items"] < block["of"]
    first = (tmp_path / "td" / "report.md").read_text(encoding="utf-8").splitlines()[0]
    assert first.endswith(f"±{block['half_width'] * 100:.1f} points (95 %; asked ±60)")
