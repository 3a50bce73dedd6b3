"""The paper's tables first: for one run of each benchmark, the console and report.md show the paper's
headline table (its columns, in its order) and the main detail table, with values equal to the
summary's and, for one category, to a value computed here from records.jsonl."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from evalkit import run
from evalkit.report.console import print_summary
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


def _run(bench: str, tmp_path: Path) -> tuple[dict, list[dict], str, str]:
    with SimThread(SimConfig(answer_key=answer_key_for(bench, {}), params=SimParams(theta=0.7, r=0.9))) as sim:
        res = run(bench, "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "run"),
                  cache_dir=str(tmp_path / "cache"), progress=False, plots=False)
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    out = io.StringIO()
    print_summary(res.summary, Console(file=out, width=80), str(tmp_path / "run"))
    return res.summary, records, out.getvalue(), (tmp_path / "run" / "report.md").read_text()


def _pct(records: list[dict]) -> float:
    return 100.0 * sum(r["correct"] is True for r in records) / len(records)


def _cells(console: str, label: str) -> list[str]:
    line = next(ln for ln in console.splitlines() if ln.strip().startswith(label))
    return line.split()


def test_rgb_th_bench_table_3_and_the_skills(tmp_path):
    summary, records, console, report = _run("rgb-th-bench", tmp_path)
    paper, skills = summary["tables"][:2]
    assert paper["head"] == ["model", "RGB-Txt QAcc", "RGB-Txt SAcc", "RGB-Th-Txt QAcc", "RGB-Th-Txt SAcc",
                             "Overall QAcc", "Overall SAcc"]
    cols = summary["metrics"]["columns"]
    assert paper["rows"][0] == ["vllm/sim-model", cols["RGB-Txt"]["QAcc"], cols["RGB-Txt"]["SAcc"],
                                cols["RGB-Th-Txt"]["QAcc"], cols["RGB-Th-Txt"]["SAcc"], cols["Overall"]["QAcc"],
                                cols["Overall"]["SAcc"]]
    counting = [r for r in records if r["category"] == "Instance Counting"]
    row = next(r for r in skills["rows"] if r[0] == "Instance Counting")
    assert row[2] == pytest.approx(_pct(counting)) and row[4] == len(counting)
    assert _cells(console, "Instance Counting")[-4] == f"{_pct(counting):.2f}"
    assert "| model | RGB-Txt QAcc | RGB-Txt SAcc | RGB-Th-Txt QAcc |" in report
    assert report.index("RGB-Th-Bench Table 3") < report.index("Skills × (QAcc, SAcc)") < report.index("## Counts")
    assert len(console.splitlines()) <= 45 and console.index("Table 3") < console.index("correct ")


def test_mme_realworld_tables_3_and_4(tmp_path):
    summary, records, console, report = _run("mme-realworld", tmp_path)
    perception = summary["tables"][0]
    assert perception["head"][0] == "model" and perception["head"][-2:] == ["Avg", "Avg-C"]
    assert perception["head"][1:-2] == [d for d in ("OCR", "RS", "DT", "MO", "AD")
                                        if d in summary["metrics"]["Perception"]]
    ocr = [r for r in records if r["category"].startswith("Perception/OCR")]
    i = perception["head"].index("OCR")
    assert perception["rows"][0][i] == pytest.approx(_pct(ocr)) and perception["rows"][1][i] == len(ocr)
    assert "MME-RealWorld Table 4: reasoning" in report and "MME-RealWorld Table 3: perception" in console
    assert len(console.splitlines()) <= 45


def test_a_generic_mcq_set_gets_categories_by_accuracy(tmp_path):
    summary, records, console, report = _run("mcq", tmp_path)
    per = summary["tables"][1]
    assert per["head"] == ["category", "accuracy"]
    first = per["rows"][0][0]
    mine = [r for r in records if r["category"] == first]
    assert per["rows"][0][1] == pytest.approx(_pct(mine))
    assert f"| {first} | {_pct(mine):.2f} |" in report
