"""`evalkit compare` over repeats: the mean of the repeats every run has, per-item mean correctness in the
intervals and paired tests, and, without repeats, exactly the comparison it always was.

Every expected number is recomputed here from records.jsonl, independently of evalkit's grouping."""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from cli_under_test import run_main
from run_factory import LETTERS, make_run, record
from synthetic_data import make_mcq_jsonl

from evalkit.benchmarks import get_benchmark
from evalkit.core.record import Record
from evalkit.engine.repeats import add_repeats, repeat_id
from evalkit.multi.compare import compare
from evalkit.rundir.layout import RunDir
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

METHOD = ("ranked on the mean of 3 common repeats; intervals and paired tests resample items with per-item mean "
          "correctness over the repeats")


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def _per_repeat_accuracy(run: Path, k: int) -> list[float]:
    """Accuracy (%) of each repeat 0..k-1, from the records' own fields."""
    by: dict[int, list[bool]] = defaultdict(list)
    for r in _lines(run):
        by[r.get("repeat", 0)].append(r["correct"] is True)
    return [100 * sum(by[r]) / len(by[r]) for r in range(k)]


def _per_item_mean(run: Path, k: int) -> dict[str, float]:
    """Each question's share of repeats 0..k-1 answered right, keyed by the question's id."""
    by: dict[str, list[bool]] = defaultdict(list)
    for r in _lines(run):
        if r.get("repeat", 0) < k:
            by[r["query_id"].split("#r")[0]].append(r["correct"] is True)
    assert all(len(v) == k for v in by.values())
    return {q: sum(v) / k for q, v in by.items()}


# ---- end to end: two runs of a sampling simulated model, with 3 and 5 repeats -------------------------


def _sim_runs(tmp_path: Path) -> tuple[Path, Path]:
    """A weaker model asked 3 times, a stronger one 5 times (each its own simulated server and cache)."""
    data = make_mcq_jsonl(tmp_path / "ds", 24, seed=61)
    key = answer_key_for("mcq", {"data": str(data)})
    runs = []
    for name, theta, n in (("three", 0.4, "3"), ("five", 0.7, "5")):
        params = SimParams(theta=theta, r=0.9, seed=3, sample_rate=0.4)
        with SimThread(SimConfig(answer_key=key, params=params)) as sim:
            proc = run_main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                            "--out", str(tmp_path / name), "--cache-dir", str(tmp_path / f"cache-{name}"),
                            "--no-progress", "--seed", "7", "--repeats", n])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs.append(tmp_path / name)
    return runs[0], runs[1]


def test_three_and_five_repeats_compare_on_the_three_they_share(tmp_path):
    three, five = _sim_runs(tmp_path)
    c = compare([three, five], out=tmp_path / "cmp", n_boot=400)
    assert c.repeats is not None and c.repeats.k == 3 and c.repeats.per_run == {"vllm/sim-model (three)": 3,
                                                                               "vllm/sim-model (five)": 5}
    note = next(n for n in c.notes if n.startswith("repeats differ"))
    assert "(vllm/sim-model (three): 3, vllm/sim-model (five): 5)" in note
    assert "compared on the 3 common repeats 0–2; later repeats are not used (vllm/sim-model (five): 3–4)" in note
    assert METHOD in note and "paired bootstrap" in note
    per_item = {}
    for m in c.results:
        run = c.runs[m.label].path
        per = _per_repeat_accuracy(run, 3)
        assert len(set(per)) > 1  # the repeats do differ: the mean is not repeat 0's number
        assert m.estimate == pytest.approx(statistics.mean(per))
        assert m.repeats.sd["accuracy"] == pytest.approx(statistics.stdev(per))
        assert m.repeats.per_repeat == [pytest.approx({"accuracy": p}) for p in per]
        assert f"{json.dumps(round(statistics.mean(per), 2))} ± {json.dumps(round(statistics.stdev(per), 2))}" in note
        # the paired test's per-item values: each question's mean correctness over repeats 0-2
        expected = _per_item_mean(run, 3)
        assert dict(zip(m.table.keys, m.table.values.tolist(), strict=True)) == pytest.approx(expected)
        assert m.table.repeats == 3 and not m.table.binary
        assert m.ci.lo <= m.estimate <= m.ci.hi and m.ci.lo < m.ci.hi
        per_item[m.label] = expected
    all_five = _per_repeat_accuracy(five, 5)
    assert statistics.mean(all_five) != pytest.approx(statistics.mean(all_five[:3]))  # repeats 3-4 would show
    (a, b), pair = c.ranking, c.pairs[0]
    assert pair.mcnemar is None and pair.p == pair.p_bootstrap and pair.n_common == 24
    diffs = [per_item[a][q] - per_item[b][q] for q in per_item[a]]
    assert pair.diff.estimate == pytest.approx(100 * statistics.mean(diffs))
    assert pair.diff.lo <= pair.diff.estimate <= pair.diff.hi
    saved = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert saved["repeats"]["k"] == 3 and saved["repeats"]["method"] == METHOD
    assert saved["repeats"]["unused"] == {"vllm/sim-model (five)": [3, 4]}
    assert "McNemar" in saved["repeats"]["paired_test"] and "paired bootstrap" in saved["repeats"]["paired_test"]
    assert [m["repeats"]["sd"]["accuracy"] for m in saved["models"]] == \
        [pytest.approx(m.repeats.sd["accuracy"]) for m in c.results]
    text = (tmp_path / "cmp" / "report.md").read_text()
    assert METHOD[0].upper() + METHOD[1:] in text and "*Significantly above*: the paired bootstrap" in text
    assert "| sd (3 repeats) |" in text and "McNemar p" not in text
    assert "## Repeats: accuracy on each of the 3 common repeats" in text


# ---- run directories written directly: exact numbers, circular shifts, repeat 0 only --------------------


def _repeated_run(path: Path, model: str, outcomes: list[list[bool]], *, circular: bool = False) -> Path:
    """A run with len(outcomes) repeats (outcomes[r][i]: question i right in repeat r), written as
    `evalkit run --repeats` leaves it: repeat 0's summary, then summary["repeats"] over every record."""
    def one(i: int, ok: bool) -> Record:
        if circular:  # 4 shifts of question i//4
            return record(f"{i // 4}|s{i % 4}", ok, gold=LETTERS[i % 4], base=str(i // 4),
                          variant={"shift": i % 4})
        return record(f"q{i}", ok, gold=LETTERS[i % 4], category=("colour", "count")[i % 2])

    records = [replace(rec, query_id=repeat_id(rec.query_id, r), repeat=r, request_key=f"{rec.request_key}-{r}")
               for r, row in enumerate(outcomes) for rec in (one(i, ok) for i, ok in enumerate(row))]
    make_run(path, model, [rec for rec in records if not rec.repeat], **({"circular": True} if circular else {}))
    rundir = RunDir(path)
    rundir.rewrite_records(records)
    summary = rundir.read_summary()
    options = {"benchmark": "mcq", "circular": True} if circular else {"benchmark": "mcq"}
    if len(outcomes) > 1:
        add_repeats(summary, get_benchmark("mcq"), records, options, len(outcomes), len(records))
    rundir.write_summary(summary)
    return path


def _draws(n: int, p: float, rng: random.Random) -> list[bool]:
    return [rng.random() < p for _ in range(n)]


def test_circular_accuracy_is_averaged_per_question_over_repeats(tmp_path):
    rng = random.Random(5)
    a = _repeated_run(tmp_path / "a", "A", [_draws(160, 0.8, rng) for _ in range(2)], circular=True)
    b = _repeated_run(tmp_path / "b", "B", [_draws(160, 0.6, rng) for _ in range(4)], circular=True)
    c = compare([a, b], n_boot=200)
    assert c.repeats.k == 2 and c.metric == "circular_accuracy"
    for m in c.results:
        lines = [r for r in _lines(c.runs[m.label].path) if r.get("repeat", 0) < 2]
        right: dict[tuple[int, str], bool] = {}
        for r in lines:  # a question counts in a repeat when all four of its shifts are right
            key = (r.get("repeat", 0), r["base_id"])
            right[key] = right.get(key, True) and r["correct"] is True
        per = [100 * statistics.mean(ok for (rep, _), ok in right.items() if rep == k) for k in (0, 1)]
        assert m.estimate == pytest.approx(statistics.mean(per))
        assert m.repeats.sd["circular_accuracy"] == pytest.approx(statistics.stdev(per))
        values = dict(zip(m.table.keys, m.table.values.tolist(), strict=True))
        assert len(values) == 40
        assert values == pytest.approx({q: (right[(0, q)] + right[(1, q)]) / 2 for _, q in right})


def test_runs_sharing_only_repeat_zero_compare_as_without_repeats(tmp_path):
    """One run with 1 repeat, one with 3: everything is repeat 0's, exactly as for the same runs without
    the extra repeats, apart from the note that says so."""
    rng = random.Random(7)
    rows = [_draws(50, 0.7, rng) for _ in range(3)]
    one = _repeated_run(tmp_path / "one", "A", [_draws(50, 0.6, rng)])
    three = _repeated_run(tmp_path / "three", "B", rows)
    plain = _repeated_run(tmp_path / "plain" / "three", "B", rows[:1])
    mixed = compare([one, three], n_boot=200).to_dict()
    alone = compare([one, plain], n_boot=200).to_dict()
    note = "repeats differ (A: 1, B: 3): compared on repeat 0, the one repeat they have in common (each run's headline)"
    assert mixed["notes"] == [note] and alone["notes"] == [] and "repeats" not in mixed
    for d in (mixed, alone):
        d["notes"] = []
        for m in d["models"]:
            m.pop("run_dir")
            m.pop("usage")  # the extra repeats were paid for
    assert mixed == alone


# ---- without repeats: byte for byte what compare wrote before it knew of repeats ----------------------

# sha256 of report.md and comparison.json (tmp path replaced by "<tmp>") written by evalkit before compare
# used repeats (commit 4fecfee), for the runs below; since issue 44 item 3 with the costs as paid and list
# (the leaderboard's cost column and the note under it, comparison.json's list_cost_usd and paid_usd)
GOLDEN = {"report.md": "93006fc0f58a3048ce0dc48f7c441c66232885f9a1f42fb282096a053037a14d",
          "comparison.json": "e789027f725e8e3bfe7cabbd3ca7817549fb60ef18949a62c1750149b239574e"}


def test_without_repeats_the_report_and_json_are_unchanged(tmp_path):
    dirs = []
    for name, seed in (("A", 1), ("B", 2), ("C", 3)):
        rng = random.Random(seed)
        recs = [record(f"q{i}", rng.random() < 0.6, gold=LETTERS[i % 4], category=("colour", "count")[i % 2])
                for i in range(60)]
        dirs.append(make_run(tmp_path / f"run-{name}", name, recs))
    c = compare(dirs, out=tmp_path / "cmp", n_boot=300)
    assert c.repeats is None and all(m.repeats is None and m.table.repeats == 1 for m in c.results)
    for name, digest in GOLDEN.items():
        text = (tmp_path / "cmp" / name).read_text().replace(str(tmp_path), "<tmp>")
        assert hashlib.sha256(text.encode()).hexdigest() == digest, name
