"""Lint at the start of `evalkit run`: the cheap checks in lint.json, their counts in summary.json,
the error-level findings in report.md beside the scores they affect, and --strict stopping the
run before any request."""

from __future__ import annotations

import json
from pathlib import Path

from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


def _faulty(folder: Path) -> Path:
    """Six clean questions, then q00000 asked again on its image with another gold answer."""
    data = make_mcq_jsonl(folder, 6, seed=71)
    rows = [json.loads(x) for x in data.read_text().splitlines()]
    twin = {**rows[0], "id": "twin", "answer": "B" if rows[0]["answer"] != "B" else "C"}
    data.write_text("".join(json.dumps(r) + "\n" for r in [*rows, twin]), encoding="utf-8")
    return data


def _argv(sim: SimThread, data: Path, tmp: Path, *extra: str) -> list[str]:
    return ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
            "--out", str(tmp / "run"), "--cache-dir", str(tmp / "cache"), "--no-progress", "--no-plots", *extra]


def test_a_run_lints_its_data_reports_it_and_strict_stops_before_asking(tmp_path):
    data = _faulty(tmp_path / "ds")
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.9, seed=1))) as sim:
        strict = run_main(_argv(sim, data, tmp_path, "--strict"))
        assert strict.returncode == 2 and "--strict: the run is not started" in strict.stderr
        assert "1 error" in strict.stderr and len(strict.stderr.strip().splitlines()) == 1
        assert sim.counters.snapshot()["requests"] == 0 and not (tmp_path / "run").exists()

        plain = run_main(_argv(sim, data, tmp_path))
        assert plain.returncode == 0, plain.stderr
        assert "lint: 1 error" in plain.stdout + plain.stderr
        # never blocking without --strict (the twin's request is q00000's: it may come from the cache)
        assert sim.counters.snapshot()["requests"] in (6, 7)
    run = tmp_path / "run"
    assert len((run / "records.jsonl").read_text().splitlines()) == 7
    assert len(list((tmp_path / "cache" / "lint").glob("*.cheap.json"))) == 1  # kept: the next run reuses it
    lint = json.loads((run / "lint.json").read_text())
    dup = [f for f in lint["findings"] if f["kind"] == "duplicate-question"]
    assert len(dup) == 1 and dup[0]["severity"] == "error" and set(dup[0]["items"]) == {"q00000", "twin"}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["lint"]["counts"]["error"] == 1 and summary["lint"]["file"] == "lint.json"
    (err,) = summary["lint"]["errors"]
    assert err["kind"] == "duplicate-question" and err["categories"] == ["cat0"]
    report = (run / "report.md").read_text()
    section = report.split("## Data checks (lint)", 1)[1].split("\n## ", 1)[0]
    assert "1 error" in section and "duplicate-question" in section and "q00000, twin" in section
    assert "cat0 (" in section  # beside the category's score


def test_a_clean_run_records_a_clean_lint(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=72)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.9, seed=1))) as sim:
        proc = run_main(_argv(sim, data, tmp_path, "--strict"))
    assert proc.returncode == 0, proc.stderr
    assert "lint:" not in proc.stdout + proc.stderr  # nothing found: nothing said
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["lint"]["errors"] == [] and summary["lint"]["counts"]["error"] == 0
    assert "## Data checks (lint)" in (tmp_path / "run" / "report.md").read_text()


def test_evalkit_report_keeps_the_runs_lint(tmp_path):
    data = _faulty(tmp_path / "ds")
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.9, seed=1))) as sim:
        assert run_main(_argv(sim, data, tmp_path)).returncode == 0
    before = json.loads((tmp_path / "run" / "summary.json").read_text())["lint"]
    assert run_main(["report", str(tmp_path / "run")]).returncode == 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["lint"] == before
    assert "## Data checks (lint)" in (tmp_path / "run" / "report.md").read_text()


def test_a_run_that_cannot_start_leaves_no_folder_not_even_its_lint(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 3, seed=73)
    proc = run_main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--data", str(data),
                    "--cache-dir", str(tmp_path / "c" / "cache"), "--out", str(tmp_path / "r" / "run"), "--no-progress"])
    assert proc.returncode == 2 and "cannot be reached" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
