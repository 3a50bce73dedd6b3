"""`evalkit export --to csv|jsonl|eee`: one row per query, every run in one file; Every Eval Ever's
aggregate and instance-level JSON, validated against the schema files vendored in tests/fixtures/eee/.
No export carries the API key the run was asked with. (MLflow and W&B: test_export_trackers.py.)"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
from export_run import CANARY, canary_in
from synthetic_data import FIXTURES

from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.export import export

EEE = FIXTURES / "eee"


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()]


def _validator(name: str) -> jsonschema.Validator:
    schema = json.loads((EEE / name).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def test_csv_is_one_row_per_query_with_every_runs_rows_in_one_file(run_dir, tmp_path):
    second = tmp_path / "second-run"
    shutil.copytree(run_dir, second)
    out = tmp_path / "all.csv"
    assert export([run_dir, second], "csv", out=out) == [out]
    with out.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    summary, records = _summary(run_dir), _records(run_dir)
    assert summary["n_queries"] == len(records) == 4 * 6
    assert len(rows) == 2 * summary["n_queries"]
    assert [r["run"] for r in rows] == [run_dir.name] * 24 + ["second-run"] * 24
    first = rows[:24]
    assert [r["query_id"] for r in first] == [r["query_id"] for r in records]
    assert [r["raw_answer"] for r in first] == [r["response"] for r in records]
    assert [r["parsed_answer"] for r in first] == [r["parsed"] for r in records]
    assert {r["question_id"] for r in first} == {f"q{i:05d}" for i in range(6)}
    assert json.loads(first[1]["variant"]) == records[1]["variant"] == {"shift": 1}
    assert sum(r["correct"] == "true" for r in first) == summary["counts"]["correct"]
    assert sum(r["correct"] == "false" for r in first) == summary["counts"]["wrong"]
    assert {r["model"] for r in rows} == {"vllm/sim-model"} and {r["parse_method"] for r in first} == {"rule"}
    assert sum(int(r["input_tokens"]) for r in first) == summary["usage"]["input_tokens"]
    assert sum(int(r["output_tokens"]) for r in first) == summary["usage"]["output_tokens"]
    assert sum(float(r["cost_usd"]) for r in first) == pytest.approx(summary["usage"]["cost_usd"])
    assert all(float(r["latency_s"]) > 0 and r["error"] == "" for r in first)


def test_jsonl_rows_keep_their_types_and_the_command_says_where(run_dir, tmp_path, capsys):
    out = tmp_path / "q.jsonl"
    assert main(["export", str(run_dir), "--to", "jsonl", "--out", str(out)]) == 0
    assert f"wrote 24 rows (1 run) to {out}" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    records = _records(run_dir)
    assert len(rows) == _summary(run_dir)["n_queries"] == 24
    assert [r["variant"] for r in rows] == [r["variant"] for r in records]
    assert [r["correct"] for r in rows] == [r["correct"] for r in records]
    assert all(isinstance(r["cost_usd"], float) and r["cost_usd"] > 0 for r in rows)
    assert rows[0]["input_tokens"] == records[0]["usage"]["input_tokens"]


def test_eee_files_validate_against_the_vendored_schemas_and_carry_the_interval(run_dir, tmp_path):
    aggregate_path, detail_path = export([run_dir], "eee", out=tmp_path / "eee", organization="Test Lab")
    assert aggregate_path.parent == tmp_path / "eee" / "mcq" / "vllm" / "sim-model"
    doc = json.loads(aggregate_path.read_text(encoding="utf-8"))
    aggregate = _validator("eval.schema.json")
    assert list(aggregate.iter_errors(doc)) == []
    assert not aggregate.is_valid({k: v for k, v in doc.items() if k != "source_metadata"})  # not vacuous
    instance = _validator("instance_level_eval.schema.json")
    lines = [json.loads(x) for x in detail_path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 24 and all(list(instance.iter_errors(x)) == [] for x in lines)

    summary, manifest = _summary(run_dir), json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    results = {r["evaluation_result_id"]: r for r in doc["evaluation_results"]}
    headline = results["mcq/circular_accuracy"]["score_details"]
    ci = headline["uncertainty"]["confidence_interval"]
    assert headline["score"] == summary["metrics"]["circular_accuracy"]
    assert [ci["lower"], ci["upper"]] == summary["headline"]["ci95"] and ci["confidence_level"] == 0.95
    assert headline["uncertainty"]["num_samples"] == 6 and headline["uncertainty"]["num_bootstrap_samples"] == 2000
    assert results["mcq/per_category/cat1"]["score_details"]["score"] == summary["metrics"]["per_category"]["cat1"]
    assert "mcq/n" not in results and "mcq/n_questions" not in results  # sample sizes are not scores
    source = doc["source_metadata"]
    assert source["source_type"] == "evaluation_run" and source["source_organization_name"] == "Test Lab"
    assert json.loads(source["additional_details"]["data_source"]) == summary["data_source"]
    assert "cache_dir" in manifest  # the run notes its cache folder for evalkit report; an export leaves it out
    assert json.loads(source["additional_details"]["manifest"]) == {k: v for k, v in manifest.items() if k != "cache_dir"}
    data = results["mcq/accuracy"]["source_data"]
    assert data["source_type"] == "other" and data["source_id"] == f"sha256:{summary['config']['data_sha256']}"
    assert doc["model_info"]["inference_engine"] == {"name": "vllm", "version": next(
        iter(manifest["servers"].values()))["version"]}
    assert results["mcq/accuracy"]["generation_config"]["generation_args"] == {
        "temperature": 0.0, "top_p": None, "max_tokens": 1024}
    detail = doc["detailed_evaluation_results"]
    assert detail["file_path"] == detail_path.name and detail["total_rows"] == 24
    assert detail["checksum"] == hashlib.sha256(detail_path.read_bytes()).hexdigest()
    records = _records(run_dir)
    assert [x["sample_id"] for x in lines] == [r["query_id"] for r in records]
    assert [x["evaluation"]["is_correct"] for x in lines] == [r["correct"] for r in records]
    assert {x["evaluation_id"] for x in lines} == {doc["evaluation_id"]}
    assert {x["evaluation_result_id"] for x in lines} == {"mcq/circular_accuracy"}
    again, _ = export([run_dir], "eee", out=tmp_path / "eee")
    assert again == aggregate_path  # the same run exports to the same files


# one run directory per benchmark written by 0.1.0, and 0.2's with --repeats (its sd over repeats)
FIXTURE_RUNS = [*(next((FIXTURES / "v010" / name / "runs").glob("*/summary.json"))
                  for name in ("mcq-circular", "if-bench", "tdbench", "rgb-th-bench", "mme-realworld")),
                next((FIXTURES / "v02" / "mcq-repeats" / "runs").glob("*/summary.json"))]


def test_every_benchmarks_earlier_run_directories_export_valid_eee(tmp_path):
    """Run directories of every benchmark written by 0.1.0 and 0.2 (no data_source, no manifest)."""
    aggregate, instance = _validator("eval.schema.json"), _validator("instance_level_eval.schema.json")
    benchmarks = set()
    for summary_path in FIXTURE_RUNS:
        doc_path, lines_path = export([summary_path.parent], "eee", out=tmp_path)
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
        assert list(aggregate.iter_errors(doc)) == [], summary_path
        lines = [json.loads(x) for x in lines_path.read_text(encoding="utf-8").splitlines()]
        assert all(instance.is_valid(x) for x in lines[:20]) and len(lines) == doc["detailed_evaluation_results"][
            "total_rows"] > 0
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        (headline,) = [r for r in doc["evaluation_results"] if "uncertainty" in r["score_details"]]
        assert headline["metric_config"]["metric_name"] == summary["headline"]["metric"]
        if summary.get("repeats"):
            assert headline["score_details"]["details"]["sd_over_repeats"] == "0.0"
        benchmarks.add(summary["benchmark"])
    assert benchmarks == {"mcq", "if-bench", "tdbench", "rgb-th-bench", "mme-realworld"}


def test_no_export_carries_the_key_the_run_was_asked_with(run_dir, tmp_path):
    assert canary_in(run_dir) == []
    for to in ("csv", "jsonl", "eee"):
        export([run_dir], to, out=tmp_path / f"out-{to}")
    assert sum(p.is_file() for p in tmp_path.rglob("*")) == 4  # the CSV, the JSON Lines, the two EEE files
    assert canary_in(tmp_path) == []
    assert CANARY not in json.dumps(_summary(run_dir)["config"])


def test_bad_input_is_one_line_and_writes_nothing(run_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "q.csv"
    assert main(["export", str(run_dir), str(tmp_path / "nope"), "--to", "csv", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nope'} is not an evalkit run directory" in err and not out.exists()
    assert main(["export", str(run_dir), "--to", "csv", "--tracking-uri", "sqlite:///x.db"]) == 2
    assert "--tracking-uri does not apply to --to csv (only to mlflow)" in capsys.readouterr().err
    assert main(["export", str(run_dir), "--to", "eee", "--out", str(run_dir / "summary.json")]) == 2
    assert "summary.json: a file; --to eee writes into a folder" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the extra were not installed
    with pytest.raises(EvalkitError, match=r"needs mlflow-skinny, which is not installed: pip install 'evalkit\[mlflow\]'"):
        export([run_dir], "mlflow", tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
