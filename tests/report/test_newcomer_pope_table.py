"""POPE's report leads with the paper's table: split × (accuracy, precision, recall, F1, yes-ratio)
(issue 35 item 7). The numbers are checked against a hand count on eight questions."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from run_factory import make_run

from evalkit.core.record import Record
from evalkit.report.console import print_summary


def _rec(qid: str, split: str, gold: str, parsed: str | None, error: str | None = None) -> Record:
    return Record(query_id=qid, item_id=qid, base_id=qid, variant={}, model="m", request_key="k" + qid,
                  response=parsed, gold=gold, parsed=parsed, parse_method="official", correct=parsed == gold,
                  error=error, category=split)


RECORDS = [  # random: TP, FN, FP, TN, TN; popular: TP, a yes question that failed, TN
    _rec("r1", "random", "Yes", "Yes"), _rec("r2", "random", "Yes", "No"), _rec("r3", "random", "No", "Yes"),
    _rec("r4", "random", "No", "No"), _rec("r5", "random", "No", "No"),
    _rec("p1", "popular", "Yes", "Yes"), _rec("p2", "popular", "Yes", None, error="timeout"),
    _rec("p3", "popular", "No", "No"),
]
# by hand: accuracy (TP+TN)/N, precision TP/(TP+FP), recall TP/(all yes questions), F1 2TP/(2TP+FP+misses),
# yes-ratio (TP+FP)/N, in %
EXPECTED = {
    "random": [60.0, 50.0, 50.0, 50.0, 40.0, 5],
    "popular": [200 / 3, 100.0, 50.0, 200 / 3, 100 / 3, 3],
    "all": [62.5, 200 / 3, 50.0, 400 / 7, 37.5, 8],
}


def test_the_split_table_matches_a_hand_count(tmp_path):
    run = make_run(tmp_path / "run", "m", RECORDS, benchmark="pope", mode="official")
    summary = json.loads((run / "summary.json").read_text())
    table = summary["tables"][0]
    assert table["head"] == ["split", "Accuracy", "Precision", "Recall", "F1 Score", "Yes (%)", "n"]
    assert [row[0] for row in table["rows"]] == ["random", "popular", "all"]
    for row in table["rows"]:
        assert row[1:] == pytest.approx(EXPECTED[row[0]]), row[0]
    report = (run / "report.md").read_text()
    assert "## POPE: accuracy, precision, recall, F1 and yes-ratio per split (%)" in report
    assert "| random | 60.00 | 50.00 | 50.00 | 50.00 | 40.00 | 5 |" in report
    assert "| popular | 66.67 | 100.00 | 50.00 | 66.67 | 33.33 | 3 |" in report
    assert "| **all** | 62.50 | 66.67 | 50.00 | 57.14 | 37.50 | 8 |" in report
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert next(line for line in lines if line.strip().startswith("all")).split() == \
        ["all", "62.50", "66.67", "50.00", "57.14", "37.50", "8"]
    assert next(line for line in lines if line.strip().startswith("split")).split() == \
        ["split", "Accuracy", "Precision", "Recall", "Score", "(%)", "n"]  # under "F1" and "Yes"


def test_one_split_is_one_row():
    from evalkit.benchmarks.pope import pope_metrics, pope_table

    table = pope_table(pope_metrics(RECORDS[:5]))
    assert [row[0] for row in table.rows] == ["random"] and table.rows[0][1:] == pytest.approx(EXPECTED["random"])
