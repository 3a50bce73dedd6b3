"""The lenient load hook of every benchmark (same items as the strict loader on clean data; the
readable items plus every problem on damaged data) and the per-benchmark protocol checks."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest

from evalkit.benchmarks import get_benchmark, list_benchmarks
from evalkit.benchmarks.base import Benchmark
from evalkit.benchmarks.prepare import resolve_data
from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.lint.engine import lint_data


def kinds_of(report, item: str) -> set[tuple[str, str]]:
    return {(f.severity, f.kind) for f in report.findings if item in f.items}


@pytest.mark.parametrize("name", list_benchmarks())
def test_lenient_hook_reads_clean_data_as_the_strict_loader(name):
    bench = get_benchmark(name)
    reads_with_a_sink = "sink" in inspect.signature(type(bench).load).parameters
    assert reads_with_a_sink or type(bench).load_lenient is not Benchmark.load_lenient, \
        f"{name} does not implement the lenient hook"
    data = resolve_data(bench, "sample").path
    strict = bench.load(data, None, {})
    lenient = bench.load_lenient(data, None, {})
    assert lenient.problems == []
    assert lenient.items == strict and len(strict) > 0  # ids, text, options, gold, images, category
    for a, b in zip(lenient.items, strict, strict=True):  # and every meta value a run reads (lint adds notes)
        assert {k: a.meta[k] for k in b.meta if k != "variants"} == {k: v for k, v in b.meta.items() if k != "variants"}
        for deg, variant in (b.meta.get("variants") or {}).items():
            assert {k: a.meta["variants"][deg][k] for k in variant} == variant


def test_mcq_tsv_and_jsonl_damage(tmp_path):
    tsv = tmp_path / "set.tsv"
    src = dataset_path("demo", "mcq.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = src[0], src[1:]
    cols = header.split("\t")
    bad_index = rows[1].split("\t")
    bad_index[cols.index("index")] = ""
    bad_ref = rows[2].split("\t")
    bad_ref[cols.index("image")] = "99999"  # refers to an index that is not in the file
    tsv.write_text("\n".join([header, rows[0], "\t".join(bad_index), "\t".join(bad_ref), *rows[3:]]) + "\n")
    bench = get_benchmark("mcq")
    with pytest.raises(EvalkitError, match="row 2: empty index"):
        bench.load(tsv, None, {})
    got = bench.load_lenient(tsv, None, {})
    referring = [r.split("\t")[0] for r in rows if r.split("\t")[cols.index("image")] == "2"]
    assert referring  # rows sharing the broken row's image cannot be read either
    assert len(got.items) == len(rows) - 2 - len(referring)
    assert [(p.file, p.row, p.kind) for p in got.problems[:2]] == [(str(tsv), "row 2", "unreadable-row"),
                                                                   (str(tsv), "row 3", "unreadable-row")]
    assert "image refers to index 99999" in got.problems[1].message and got.problems[1].items == ("2",)
    assert [p.items for p in got.problems[2:]] == [(i,) for i in referring]

    lines = dataset_path("demo", "mcq.jsonl").read_text(encoding="utf-8").splitlines()
    jsonl = tmp_path / "set.jsonl"
    shutil.copytree(dataset_path("demo", "images"), tmp_path / "images")
    jsonl.write_text("\n".join([lines[0], "{not json", lines[1], lines[1], *lines[2:]]) + "\n")
    got = bench.load_lenient(jsonl, None, {})
    assert len(got.items) == len(lines)
    assert [(p.row, p.kind) for p in got.problems] == [("line 2", "unreadable-row"), ("line 4", "duplicate-id")]


def test_mme_realworld_damage_and_unknown_question_type(tmp_path):
    records = json.loads(dataset_path("mme-realworld", "MME_RealWorld.json").read_text(encoding="utf-8"))
    del records[1]["Task"]
    records[4]["Question_id"] = records[3]["Question_id"]
    records[2]["Question type"] = "Open Ended"
    records[5]["Ground truth"] = "Z"
    data = tmp_path / "MME_RealWorld.json"
    data.write_text(json.dumps(records), encoding="utf-8")
    images = dataset_path("mme-realworld")
    got = get_benchmark("mme-realworld").load_lenient(data, images, {})
    assert len(got.items) == len(records) - 2
    assert [(p.row, p.kind) for p in got.problems] == [("record 2", "unreadable-row"), ("record 5", "duplicate-id")]
    assert "missing Task" in got.problems[0].message
    report, _ = lint_data("mme-realworld", data, images)
    assert kinds_of(report, records[2]["Question_id"]) == {("warning", "question-type")}
    assert kinds_of(report, records[5]["Question_id"]) == {("error", "gold-not-in-options")}
    assert report.counts["error"] == 3  # the two unreadable records and the gold


def _official_tdbench(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for p in dataset_path("tdbench").glob("*.tsv"):
        shutil.copy(p, folder / p.name)
    return folder


def test_tdbench_rotation_files_that_disagree(tmp_path):
    data = _official_tdbench(tmp_path / "td")
    strict = get_benchmark("tdbench").load(data, None, {})
    rot180 = (data / "tdbench_rot180.tsv").read_text().splitlines()
    dropped = rot180[-1].split("\t")[0]
    (data / "tdbench_rot180.tsv").write_text("\n".join(rot180[:-1]) + "\n")
    rot90 = (data / "tdbench_rot90.tsv").read_text().splitlines()
    fields = rot90[1].split("\t")
    changed, fields[-1] = fields[0], ("Object Counting" if fields[-1] != "Object Counting" else "Object Presence")
    (data / "tdbench_rot90.tsv").write_text("\n".join([rot90[0], "\t".join(fields), *rot90[2:]]) + "\n")
    got = get_benchmark("tdbench").load_lenient(data, None, {})
    assert [it.id for it in got.items] == [it.id for it in strict]  # every problem is still checked
    assert sorted(got.items[[it.id for it in got.items].index(dropped)].meta["variants"]) == [0, 90, 270]
    assert [(p.kind, p.items) for p in got.problems] == [("rotation-mismatch", (dropped,)),
                                                          ("rotation-mismatch", (changed,))]
    assert got.problems[0].file.endswith("tdbench_rot180.tsv") and "missing from this rotation file" in \
        got.problems[0].message
    assert "different categories across rotations" in got.problems[1].message
    report, _ = lint_data("tdbench", data, None)
    assert kinds_of(report, dropped) == kinds_of(report, changed) == {("error", "rotation-mismatch")}


def test_ifbench_damage_keeps_ids_and_finds_circular_collisions(tmp_path):
    src = dataset_path("if-bench", "if_bench_sample.json")
    raw = json.loads(src.read_text(encoding="utf-8"))
    del raw["Image Theme"][0]["question"]["en_question"]
    q = raw["Object Counting"][1]["question"]
    q["en_options"]["C"] = q["en_options"][q["answer"]] if q["answer"] != "C" else q["en_options"]["A"]
    data = tmp_path / "if_bench.json"
    data.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    images = dataset_path("if-bench", "infrared_imgs")
    bench = get_benchmark("if-bench")
    clean_ids = [it.id for it in bench.load(src, images, {})]
    got = bench.load_lenient(data, images, {})
    assert [it.id for it in got.items] == [i for i in clean_ids if i != "IT-001"]  # no id moved
    assert [(p.items, p.kind) for p in got.problems] == [(("IT-001",), "unreadable-row")]
    assert "no 'en_question'" in got.problems[0].message and "dimension 'Image Theme' item 1" in got.problems[0].row
    report, _ = lint_data("if-bench", data, images)
    collision = [f for f in report.findings if f.kind == "circular-collision"]
    assert [(f.severity, f.items) for f in collision] == [("error", ("OC-002",))]
    assert "(en)" in collision[0].message and "duplicate-option" not in {f.kind for f in report.findings}


def test_rgbth_damage(tmp_path):
    data = tmp_path / "release"
    shutil.copytree(dataset_path("rgb-th-bench"), data, ignore=shutil.ignore_patterns("*.py"))
    qfile = data / "Source 1" / "Hot Water Pipe" / "questions.json"
    doc = json.loads(qfile.read_text(encoding="utf-8"))
    doc["data"][0]["data_type"] = "Video"
    doc["data"][1]["QAs"][0]["answer"] = "Maybe"
    qfile.write_text(json.dumps(doc), encoding="utf-8")
    bench = get_benchmark("rgb-th-bench")
    strict_clean = bench.load(dataset_path("rgb-th-bench"), None, {})
    got = bench.load_lenient(data, None, {})
    lost = [it.id for it in strict_clean if it.id.startswith("Source 1/Hot Water Pipe/b00/")]
    assert [it.id for it in got.items] == [it.id for it in strict_clean if it.id not in lost]
    assert [(p.row, p.where, p.kind) for p in got.problems] == [
        ("block 0", "Source 1/Hot Water Pipe, block 0", "unreadable-row")]
    maybe = "Source 1/Hot Water Pipe/b01/q0"
    report, _ = lint_data("rgb-th-bench", data, None)
    assert kinds_of(report, maybe) == {("error", "gold-not-yes-no")}


def test_pope_damage(tmp_path):
    shutil.copytree(dataset_path("pope", "images"), tmp_path / "images")
    lines = dataset_path("pope", "pope_sample.jsonl").read_text(encoding="utf-8").splitlines()
    second = json.loads(lines[1])
    second["label"] = "maybe"
    data = tmp_path / "coco_pope_random.jsonl"
    data.write_text("\n".join([lines[0], json.dumps(second), "[1, 2", *lines[2:]]) + "\n", encoding="utf-8")
    got = get_benchmark("pope").load_lenient(data, None, {})
    assert len(got.items) == len(lines)
    assert [(p.row, p.kind) for p in got.problems] == [("line 3", "unreadable-row")]
    assert got.problems[0].message.startswith("line 3: invalid JSON")
    report, _ = lint_data("pope", data, None)
    assert kinds_of(report, str(second["question_id"])) == {("error", "gold-not-yes-no")}


def test_tdbench_generated_and_case_study_forms(tmp_path):
    from synthetic_data import tdbench_set

    bench = get_benchmark("tdbench")
    src = tdbench_set(tmp_path / "gen", 8)
    lenient = bench.load_lenient(src, None, {})
    assert lenient.problems == [] and lenient.items == bench.load(src, None, {})
    lines = src.read_text().splitlines()
    broken = json.loads(lines[0])
    broken["answer"] = "F"
    src.write_text("\n".join([json.dumps(broken), "{", *lines[1:]]) + "\n")
    got = bench.load_lenient(src, None, {})
    assert [(p.row, p.kind) for p in got.problems] == [("line 2", "unreadable-row")]
    assert len(got.items) == 8  # the gold outside the options is kept, for lint's check to name
    report, _ = lint_data("tdbench", src, None)
    assert kinds_of(report, broken["id"]) == {("error", "gold-not-in-options")}
    single = dataset_path("tdbench", "tdbench_rot0.tsv")
    assert bench.load_lenient(single, None, {}).items == bench.load(single, None, {})


def test_pope_splits_may_share_questions_but_not_within_one(tmp_path):
    shutil.copytree(dataset_path("pope", "images"), tmp_path / "images")
    row = {"image": "images/scene0.png", "text": "Is there a ball in the image?", "label": "yes"}
    for split in ("random", "popular"):
        extra = [{**row, "question_id": 99, "label": "no"}] if split == "popular" else []
        lines = [{**row, "question_id": 1}, {**row, "question_id": 2, "text": "Is there a cat in the image?"}, *extra]
        (tmp_path / f"coco_pope_{split}.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    report, _ = lint_data("pope", tmp_path, None)
    dups = [f for f in report.findings if f.kind == "duplicate-question"]
    assert [(f.severity, f.items) for f in dups] == [("error", ("coco_pope_popular/1", "coco_pope_popular/99"))]
