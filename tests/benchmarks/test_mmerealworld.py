"""MME-RealWorld: official/robust parsing (golden cases), loaders of both forms, metrics, end to end."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from synthetic_data import REPO

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.mmerealworld import choices_from_prompt, parse_official, parse_robust
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.engine.evaluate import run
from evalkit.metrics.mmerealworld import category_group, domain_code, scoring_key
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

# The real record's choices with 13 moved to (C), so "13" -> C tests step 5 without hitting A by accident.
CHOICES = [("A", "(A) 6"), ("B", "(B) 90"), ("C", "(C) 13"), ("D", "(D) 77"),
           ("E", "(E) The image does not feature the buses")]


def _sample_module():
    path = REPO / "datasets" / "mme-realworld" / "make_sample.py"
    spec = importlib.util.spec_from_file_location("mme_make_sample", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(("text", "official", "robust"), [
    ("", "A", None),  # official: the empty string is inside every option
    ("13", "C", "C"),  # step 5: the option whose text contains the response
    ("Based on the image, C", "B", "C"),  # official: first capital A-E anywhere ("Based")
    ("Answer: E", "A", "E"),
    ("Best answer: D", "B", "D"),  # "Best answer:" is never removed (glued prefix list)
    ("The best answer is D", "D", "D"),
    ("(E) The image does not feature the buses", "E", "E"),
    ("the picture shows several vehicles but i cannot see any of the ones asked about here", None, None),
    ("I'm sorry, I can't help with that.", None, None),
])
def test_golden_official_and_robust(text, official, robust):
    assert parse_official(text, CHOICES) == official
    assert parse_robust(text, CHOICES) == robust


def test_benchmark_parse_methods_and_counts():
    bench = get_benchmark("mme-realworld")
    items = bench.load(REPO / "datasets" / "mme-realworld" / "MME_RealWorld.json", None, {})
    q = next(iter(bench.expand(items[:1], {})))
    assert bench.parse(q, "", "official").answer == "A"
    empty = bench.parse(q, "  ", "robust")
    assert (empty.answer, empty.method) == (None, "empty")
    refusal = bench.parse(q, "I'm sorry, but I can't help with that.", "robust")
    assert refusal.refusal and refusal.answer is None
    assert bench.parse(q, "I'm sorry, but I can't help with that.", "official").refusal


def test_grouping_rules():
    assert category_group("Person/attribute/color") == "person/attribute"
    assert category_group("Vehicle/attribute/orientation") == "vehicle/attribute"
    assert category_group("Vehicle/counting") == "vehicle/counting"
    assert [domain_code(s) for s in ("OCR with Complex Context", "Remote Sensing", "Diagram and Table",
                                     "Monitoring", "Autonomous_Driving")] == ["OCR", "RS", "DT", "MO", "AD"]
    assert scoring_key("perception", "Autonomous_Driving", "Objects_Identify") == "Perception/AD/objects_identify"


# ---------------------------------------------------------------------------------------- loading


def test_prompt_english_and_chinese_endings():
    bench = get_benchmark("mme-realworld")
    folder = REPO / "datasets" / "mme-realworld"
    en = next(iter(bench.expand(bench.load(folder / "MME_RealWorld.json", None, {})[:1], {})))
    rec = json.loads((folder / "MME_RealWorld.json").read_text())[0]
    # the official construction (yfzhang114/MME-RealWorld@87096fc): a space before the newline
    expected = (rec["Text"] + " The choices are listed below: \n" + "\n".join(rec["Answer choices"]) + "\n"
                "Select the best answer to the above multiple-choice question based on the image. Respond with "
                "only the letter (A, B, C, D, or E) of the correct option.\nThe best answer is:")
    assert en.prompt_text() == expected
    assert choices_from_prompt(en.prompt_text()) == [(c[1], c) for c in rec["Answer choices"]]
    cn = next(iter(bench.expand(bench.load(folder / "MME_RealWorld_CN.json", None, {})[:1], {})))
    assert cn.prompt_text().endswith("\n根据图像选择上述多项选择题的最佳答案。只需回答正确选项的字母（A, B, C, D 或 E）。\n最佳答案为：")
    assert " 选项如下所示:\n(A) " in cn.prompt_text()


def test_json_loader_errors_name_the_record(tmp_path):
    mod = _sample_module()
    recs = mod.build_records(4)
    mod.write_forms(tmp_path, recs, tsv_name=None)
    data = json.loads((tmp_path / "MME_RealWorld.json").read_text())
    bench = get_benchmark("mme-realworld")
    for mutate, message in [
        (lambda d: d[2].pop("Ground truth"), "record 3.*missing Ground truth"),
        (lambda d: d[1].__setitem__("Ground truth", "F"), "record 2.*answer 'F'"),
        (lambda d: d[3].__setitem__("Question_id", d[0]["Question_id"]), "record 4.*duplicate Question_id"),
        (lambda d: d[0].__setitem__("Image", "images/nope.jpg"), "record 1.*image file not found"),
    ]:
        bad = json.loads(json.dumps(data))
        mutate(bad)
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(EvalkitError, match=message):
            bench.load(path, None, {})


def test_real_sample_records_and_their_outputs(shared_data, tmp_path):
    """The 5 real records (both key spellings, optional Dataset), scored with their sample Outputs."""
    records = json.loads((shared_data / "mme-realworld" / "sample_records.json").read_text())
    mod = _sample_module()
    for k, rec in enumerate(records):
        mod.draw(tmp_path / rec["Image"], "red", k + 1, k, (64, 48))
    (tmp_path / "MME_RealWorld.json").write_text(json.dumps(records))
    bench = get_benchmark("mme-realworld")
    items = bench.load(tmp_path / "MME_RealWorld.json", None, {})
    assert [it.category for it in items] == ["Perception/AD/objects_identify", "Perception/DT/diagram",
                                             "Perception/MO/vehicle/counting", "Reasoning/DT/diagram",
                                             "Reasoning/DT/diagram"]
    assert [it.id for it in items] == [r["Question_id"] for r in records]
    queries = list(bench.expand(items, {}))
    recs = []
    for q, raw in zip(queries, records, strict=True):
        p = bench.parse(q, raw["Output"], "official")
        recs.append(Record(query_id=q.id, item_id=q.id, base_id=q.id, variant={}, model="m", request_key="k",
                           response=raw["Output"], gold=q.gold, parsed=p.answer, correct=bench.score(q, p),
                           category=q.category, prompt=q.prompt_text()))
    m = bench.aggregate(recs, {})
    assert m["Avg"] == pytest.approx(40.0)  # D=D, A≠B, E=E, D≠C, A≠C
    assert m["Perception"] == pytest.approx({"DT": 0.0, "MO": 100.0, "AD": 100.0, "Avg": 200 / 3,
                                              "Avg-C": 200 / 3, "n": 3})
    assert m["Reasoning"] == {"DT": 0.0, "Avg": 0.0, "Avg-C": 0.0, "n": 2}
    assert m["Avg-C"] == pytest.approx(50.0)  # mean of the four task x domain cells
    assert (m["e_rate"]["answered_E"], m["e_rate"]["gold_E"]) == (1, 1)
    matrix = m["details"]["wrong_choices"]["matrix"]
    assert matrix["B"]["A"] == 1 and matrix["C"] == {"A": 1, "B": 0, "C": 0, "D": 1, "E": 0}
    assert m["wrong_answers_by_letter"] == {"A": 2, "B": 0, "C": 0, "D": 1, "E": 0, "none": 0}


# ---------------------------------------------------------------------------------------- end to end

REPLIES = ["{gold}", "The best answer is {gold}", "Answer: {gold}", "Based on the image, {gold}", "",
           "Best answer: {gold}", "({other}) {other_text}", "{gold_text}", "E", "A"]
DOMAIN = {"OCR with Complex Context": "OCR", "Remote Sensing": "RS", "Diagram and Table": "DT",
          "Monitoring": "MO", "Autonomous_Driving": "AD"}


def _replay_key(data: Path):
    """An answer key whose replies are a fixed mix of styles, chosen by question (same in both forms)."""
    key = answer_key_for("mme-realworld", {"data": str(data)})
    for n, entry in enumerate(sorted(key.entries, key=lambda e: e.base_id)):
        other = "ABCDE"[("ABCDE".index(entry.answer) + 1 + n % 4) % 5]
        entry.reply = REPLIES[n % len(REPLIES)].format(
            gold=entry.answer, gold_text=entry.options[entry.answer], other=other, other_text=entry.options[other])
    return key


@pytest.mark.slow
def test_both_forms_identical_metrics_and_independent_figures(tmp_path):
    mod = _sample_module()
    mod.write_forms(tmp_path / "ds", mod.build_records(88, seed=7, per_image=3), size=(320, 240))
    data_json, data_tsv = tmp_path / "ds" / "MME_RealWorld.json", tmp_path / "ds" / "MME_RealWorld.tsv"
    common = dict(progress=False, max_attempts=2, concurrency=8)
    with SimThread(SimConfig(answer_key=_replay_key(data_json))) as sim:
        runs = {
            (form, mode): run("mme-realworld", "vllm/sim-model", data=str(path), base_url=sim.url, mode=mode,
                              out=str(tmp_path / f"{form}-{mode}"), cache_dir=str(tmp_path / "cache"), **common)
            for form, path in (("json", data_json), ("tsv", data_tsv)) for mode in ("official", "robust")
        }
    for mode in ("official", "robust"):
        assert runs[("json", mode)].summary["metrics"] == runs[("tsv", mode)].summary["metrics"]
        assert runs[("json", mode)].exit_code == 0

    # Avg and Avg-C from records.jsonl and the JSON file, computed here without evalkit's metrics.
    raw = {r["Question_id"]: r for r in json.loads(data_json.read_text())}
    lines = [json.loads(x) for x in (tmp_path / "json-official" / "records.jsonl").read_text().splitlines()]
    assert len(lines) == 88
    cells: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for rec in lines:
        src = raw[rec["item_id"]]
        cells[(src["Task"], DOMAIN[src["Subtask"]])].append(bool(rec["correct"]))
    m = runs[("json", "official")].summary["metrics"]
    for task in ("Perception", "Reasoning"):
        mine = {d: 100 * sum(v) / len(v) for (t, d), v in cells.items() if t == task}
        flat = [c for (t, _), v in cells.items() if t == task for c in v]
        assert m[task]["Avg"] == pytest.approx(100 * sum(flat) / len(flat))
        assert m[task]["Avg-C"] == pytest.approx(sum(mine.values()) / len(mine))
        assert {d: m[task][d] for d in mine} == pytest.approx(mine) and m[task]["n"] == len(flat)
    assert m["Avg"] == pytest.approx(100 * sum(r["correct"] for r in lines) / len(lines))
    assert m["Avg-C"] == pytest.approx(sum(100 * sum(v) / len(v) for v in cells.values()) / len(cells))

    merged = [s for s in raw.values() if s["Category"].startswith("Person/attribute/")]
    assert len({s["Category"] for s in merged}) == 2  # color and orientation, one official group
    assert m["details"]["n_by_category"]["Perception/MO/person/attribute"] == len(merged)

    # E rate and the wrong-choice matrix against the records.
    assert m["e_rate"]["answered_E"] == sum(r["parsed"] == "E" for r in lines)
    assert m["e_rate"]["gold_E"] == sum(src["Ground truth"] == "E" for src in raw.values())
    wrong = Counter((r["gold"], r["parsed"]) for r in lines if r["parsed"] and not r["correct"])
    matrix = m["details"]["wrong_choices"]["matrix"]
    assert {(g, p): n for g, row in matrix.items() for p, n in row.items() if n} == dict(wrong)
    assert sum(wrong.values()) > 10 and all(matrix[x][x] == 0 for x in matrix)

    # The official quirks decide real answers here, and the summary counts how many.
    robust_lines = {json.loads(x)["query_id"]: json.loads(x)
                    for x in (tmp_path / "json-robust" / "records.jsonl").read_text().splitlines()}
    differ = sum(r["parsed"] != robust_lines[r["query_id"]]["parsed"] for r in lines)
    assert m["modes"]["answers_differ"] == differ > 0
    assert m["modes"]["robust_accuracy"] == pytest.approx(runs[("json", "robust")].summary["metrics"]["Avg"])
    assert m["modes"]["official_accuracy"] == pytest.approx(m["Avg"])
    assert runs[("json", "robust")].summary["counts"]["unparsed"] >= 8  # empty replies: no answer in robust
    assert runs[("json", "official")].summary["cache"]["hits"] == 0  # the TSV run hit the JSON run's cache
    assert runs[("tsv", "official")].summary["cache"]["hits"] == 88 - sum(r["response"] == "" for r in lines)
