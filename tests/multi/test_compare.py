"""`evalkit compare`: ranking, intervals, paired tests, refusals, and the report with its plots."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image
from run_factory import LETTERS, make_run, record

from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.multi.compare import compare

N = 1000


def _outcomes() -> dict[str, list[bool]]:
    """The issue's design: A 700 right, B 720 (A and B disagree on 200: B 110, A 90), C 550."""
    a = [i < 700 for i in range(N)]
    b = [i < 610 or 700 <= i < 810 for i in range(N)]
    c = [i < 500 or 700 <= i < 750 for i in range(N)]
    return {"A": a, "B": b, "C": c}


@pytest.fixture
def three_runs(tmp_path):
    dirs = []
    for name, right in _outcomes().items():
        recs = [record(str(i), ok, gold=LETTERS[i % 4], category=("colour", "count", "place")[i % 3])
                for i, ok in enumerate(right)]
        dirs.append(make_run(tmp_path / f"run-{name}", name, recs))
    return dirs


def test_design_counts_are_the_issues():
    o = _outcomes()
    assert [sum(v) for v in o.values()] == [700, 720, 550]
    assert sum(x and not y for x, y in zip(o["A"], o["B"], strict=True)) == 90
    assert sum(y and not x for x, y in zip(o["A"], o["B"], strict=True)) == 110
    assert sum(x and not y for x, y in zip(o["A"], o["C"], strict=True)) == 200
    assert sum(y and not x for x, y in zip(o["A"], o["C"], strict=True)) == 50


def test_ranking_significance_and_interval(three_runs, tmp_path):
    c = compare(three_runs, out=tmp_path / "cmp")
    assert c.ranking == ["B", "A", "C"]
    assert [m.estimate for m in c.results] == pytest.approx([72.0, 70.0, 55.0])
    ab, ac, bc = c.pair("A", "B"), c.pair("A", "C"), c.pair("B", "C")
    assert (ab.mcnemar.only_a, ab.mcnemar.only_b) in ((90, 110), (110, 90))
    assert ab.mcnemar.p == pytest.approx(0.179, abs=0.002)
    assert not ab.significant and ab.p_holm >= ab.mcnemar.p
    assert ac.significant and bc.significant
    assert ac.p_holm < 1e-10 and bc.p_holm < 1e-10
    a = next(m for m in c.results if m.label == "A")
    assert 2.4 <= a.ci.half_width <= 3.3
    assert a.ci.lo < 70.0 < a.ci.hi
    assert c.beats("B") == ["C"] and c.beats("A") == ["C"] and c.beats("C") == []
    # the paired bootstrap agrees in sign and puts 0 inside A-vs-B's interval only
    assert ab.diff.lo < 0 < ab.diff.hi
    assert not (ac.diff.lo < 0 < ac.diff.hi)


def test_report_table_ranks_and_marks(three_runs, tmp_path):
    c = compare(three_runs, out=tmp_path / "cmp")
    text = (tmp_path / "cmp" / "report.md").read_text()
    board = text[text.index("## Leaderboard"):text.index("## Pairwise")]
    rows = [line for line in board.splitlines() if re.match(r"\| \d ", line)]
    assert [r.split("|")[2].strip() for r in rows] == ["B", "A", "C"]
    assert rows[0].rstrip(" |").endswith("C") and rows[2].rstrip(" |").endswith("—")
    pairs = text[text.index("## Pairwise"):]
    ab_row = next(line for line in pairs.splitlines() if line.startswith("| B | A |"))
    assert "| no |" in ab_row and "0.18" in ab_row
    data = (tmp_path / "cmp" / "comparison.json").read_text()
    assert '"ranking": [\n    "B",\n    "A",\n    "C"\n  ]' in data
    assert c.out_dir == tmp_path / "cmp"


def _png_ok(path):
    with Image.open(path) as im:
        assert im.width >= 400 and im.height >= 300, (path, im.size)
        pixels = np.asarray(im.convert("L"), dtype=float)
    assert pixels.std() > 5, f"{path} looks blank"


def _variant_runs(tmp_path, seed_models):
    """Circular runs (4 shifts, options A-E, categories) drawn from a known/guess mixture."""
    dirs = []
    for name, (theta, r, g, seed) in seed_models.items():
        rng = np.random.default_rng(seed)
        recs = []
        for i in range(300):
            knows = rng.random() < theta
            for shift in range(4):
                ok = bool(rng.random() < (r if knows else g))
                gold = LETTERS[(i + shift) % 5]
                recs.append(record(f"{i}|s{shift}", ok, gold=gold, base=str(i), variant={"shift": shift},
                                   category=("colour", "count", "place")[i % 3],
                                   wrong="E" if not ok and i % 4 == 0 and gold != "E" else None))
        dirs.append(make_run(tmp_path / f"run-{name}", name, recs, circular=True))
    return dirs


@pytest.mark.slow
def test_variant_groups_report_theta_r_g_and_every_plot(tmp_path):
    dirs = _variant_runs(tmp_path, {"strong": (0.8, 0.95, 0.3, 1), "weak": (0.4, 0.9, 0.25, 2),
                                    "mid": (0.6, 0.9, 0.3, 3)})
    c = compare(dirs, out=tmp_path / "cmp", n_boot=500)
    assert c.ranking[0] == "strong" and c.ranking[-1] == "weak"
    for m in c.results:
        ml = m.reliability["ml"]
        assert m.reliability["k"] == 4 and m.reliability["groups"] == 300
        assert {"theta", "r", "g", "A_adj"} <= set(ml)
    theta = {m.label: m.reliability["ml"]["theta"] for m in c.results}
    assert theta["strong"] == pytest.approx(0.8, abs=0.1) and theta["weak"] == pytest.approx(0.4, abs=0.12)
    assert all(t.mcnemar is not None for t in c.pairs)
    text = (tmp_path / "cmp" / "report.md").read_text()
    assert "## Reliability: θ, r, g per model" in text
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    drawn = sorted(p.name for p in (tmp_path / "cmp" / "plots").glob("*.png"))
    assert sorted(p.split("/")[-1] for p in linked) == drawn
    assert {"headline.png", "skills_heatmap.png", "categories.png", "variants.png", "confusion.png",
            "e_rate.png", "reliability.png"} <= set(drawn)
    for rel in linked:
        _png_ok(tmp_path / "cmp" / rel)


def test_refuses_different_benchmarks(tmp_path):
    a = make_run(tmp_path / "a", "A", [record("1", True)])
    b = make_run(tmp_path / "b", "B", [record("1", True, variant={"rot": 0})], benchmark="tdbench")
    with pytest.raises(EvalkitError, match=r"different benchmarks \(a: mcq, b: tdbench\)"):
        compare([a, b])


@pytest.mark.parametrize(("setting", "value", "named"), [
    ("mode", "robust", "mode"), ("circular", True, "circular"), ("limit", 5, "limit"), ("langs", "en", "langs"),
])
def test_refuses_different_protocol_settings(tmp_path, setting, value, named):
    a = make_run(tmp_path / "a", "A", [record("1", True)])
    b = make_run(tmp_path / "b", "B", [record("1", True)], **{setting: value})
    with pytest.raises(EvalkitError, match=rf"different settings: {named} \(a: .*; b: {value!r}\)"):
        compare([a, b])


def test_data_paths_may_differ_when_the_questions_agree(tmp_path):
    a = make_run(tmp_path / "a", "A", [record("1", True), record("2", False)])
    b = make_run(tmp_path / "b", "B", [record("1", True), record("2", True)], data="/elsewhere/set.tsv")
    c = compare([a, b])
    assert any("different paths" in n for n in c.notes)
    d = make_run(tmp_path / "d", "D", [record("1", True, gold="B"), record("2", True)], data="/other/set.tsv")
    with pytest.raises(EvalkitError, match=r"data \(1 questions have different answers"):
        compare([a, d])


def test_same_model_twice_gets_distinct_labels_and_generation_notes(tmp_path):
    a = make_run(tmp_path / "a", "M", [record("1", True), record("2", False)])
    b = make_run(tmp_path / "b", "M", [record("1", True), record("2", True)], temperature=0.7)
    c = compare([a, b], n_boot=200)
    assert c.ranking == ["M (b)", "M (a)"]
    assert any(n.startswith("temperature differs") for n in c.notes)


def test_cli_compare_writes_report_and_errors_are_one_line(three_runs, tmp_path, capsys):
    out = tmp_path / "board"
    assert main(["compare", *map(str, three_runs), "--out", str(out), "--n-boot", "300"]) == 0
    shown = capsys.readouterr().out
    assert re.findall(r"│\s+\d\s+│ (\w)", shown) == ["B", "A", "C"]
    assert (out / "report.md").exists() and (out / "comparison.json").exists()
    assert main(["compare", str(three_runs[0])]) == 2
    assert main(["compare", str(three_runs[0]), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "at least two run directories" in err and "not an evalkit run directory" in err
    assert err.count("\n") == 2


def test_size_correlation_within_families(three_runs, tmp_path):
    extra = []
    for name, k in (("D", 600), ("E", 800), ("F", 650)):
        extra.append(make_run(tmp_path / f"run-{name}", name, [record(str(i), i < k) for i in range(N)]))
    sizes = tmp_path / "sizes.csv"
    sizes.write_text("model,family,size\nA,fam1,7\nB,fam1,13\nC,fam1,3\nD,fam2,2B\nE,fam2,8B\nF,fam2,4B\n")
    c = compare([*three_runs, *extra], sizes=sizes, n_boot=100)
    fam1, fam2 = c.correlation["per_family"]["fam1"], c.correlation["per_family"]["fam2"]
    assert fam1["spearman"] == pytest.approx(1.0) and fam2["spearman"] == pytest.approx(1.0)
    expected = np.corrcoef([7, 13, 3], [70, 72, 55])[0, 1]
    assert fam1["pearson"] == pytest.approx(expected)
    assert c.correlation["mean"]["pearson"] == pytest.approx((fam1["pearson"] + fam2["pearson"]) / 2)
    bad = tmp_path / "bad.csv"
    bad.write_text("model,family,size\nA,fam1,seven\n")
    with pytest.raises(EvalkitError, match=r"bad.csv: row 2: size must be a number"):
        compare(three_runs, sizes=bad)


def test_every_official_metric_side_by_side_and_incomplete_runs_noted(tmp_path):
    a = make_run(tmp_path / "a", "A", [record(str(i), i % 2 == 0, category=("x", "y")[i % 2]) for i in range(10)])
    recs = [record(str(i), True, category=("x", "y")[i % 2]) for i in range(9)]
    recs.append(replace(record("9", False, category="y"), error="timeout", parsed=None, correct=None))
    b = make_run(tmp_path / "b", "B", recs)
    c = compare([a, b], out=tmp_path / "cmp", n_boot=100)
    text = (tmp_path / "cmp" / "report.md").read_text()
    table = text[text.index("## Official metrics, every model"):].split("\n\n")[1]
    assert table.splitlines()[0] == "| metric | B | A |"
    assert "| per_category / x | 100.00 | 100.00 |" in table and "| per_category / y | 80.00 | 0.00 |" in table
    assert any(n.startswith("B: the run is incomplete (0 queries missing, 1 errors)") for n in c.notes)
    assert not any("has no record" in n for n in c.notes)
    assert c.pair("A", "B").n_common == 10  # a failed query is a wrong answer in both the metric and the tests
