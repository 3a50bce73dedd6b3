"""`evalkit compare` with a run that stopped early (issue 35 item 3).

A run that answered 228 of 1,624 questions was ranked on those beside runs scored on all of them,
with nothing in its leaderboard row to say so. Now every model is ranked over the items every run
has an outcome for (said under the leaderboard and in comparison.json's `common_items`), and each
row says how much of its run there is: "12 of 40 · incomplete" in the console, report.md and
comparison.json, and "incomplete: 12 of 40 answered" in the view's leaderboard.
"""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from rich.console import Console
from run_factory import LETTERS, make_run, record

from evalkit.core.errors import EvalkitError
from evalkit.multi.compare import compare
from evalkit.report.console import print_comparison
from evalkit.view.overview import leaderboard

N, ASKED = 40, 12  # C stopped after its first 12 questions


def _runs(tmp_path):
    right = {"A": lambda i: i >= 12 and i < 36 or i < 6,  # 6 of the first 12, 30 of 40
             "B": lambda i: i < 9 or 12 <= i < 23,  # 9 of the first 12, 20 of 40
             "C": lambda i: i < 11}  # 11 of its 12
    dirs = {}
    for name, ok in right.items():
        n = ASKED if name == "C" else N
        dirs[name] = make_run(tmp_path / f"run-{name}", name, [record(str(i), ok(i), gold=LETTERS[i % 4])
                                                                for i in range(n)])
    summary_path = dirs["C"] / "summary.json"
    summary = json.loads(summary_path.read_text())  # as a run stopped after 12 of 40 leaves it
    summary.update(n_queries=N, missing=N - ASKED, complete=False)
    summary_path.write_text(json.dumps(summary))
    return dirs


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch):
    """The comparison's report without its plots (drawn from real runs in test_compare)."""
    monkeypatch.setattr("evalkit.multi.compare_report.draw_all", lambda plot_dir, results, **_: [])


def test_an_incomplete_run_is_ranked_over_the_common_items_and_marked(tmp_path):
    dirs = _runs(tmp_path)
    c = compare([dirs["A"], dirs["B"], dirs["C"]], out=tmp_path / "cmp", n_boot=200)
    assert c.ranking == ["C", "B", "A"]  # on its own 12 answers C led A (75 %) and B (50 %) unfairly placed
    assert [m.estimate for m in c.results] == pytest.approx([100 * 11 / 12, 75.0, 50.0])
    assert (c.common.items, c.common.of, c.common.queries) == (12, 40, 12)
    assert all(t.n_common == 12 for t in c.pairs)

    data = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert data["ranking"] == ["C", "B", "A"] and data["common_items"]["items"] == 12
    marks = {m["model"]: (m["complete"], m["run_answered"], m["n_queries"]) for m in data["models"]}
    assert marks == {"C": (False, 12, 40), "B": (True, 40, 40), "A": (True, 40, 40)}

    text = (tmp_path / "cmp" / "report.md").read_text()
    board = text[text.index("## Leaderboard"):text.index("## Pairwise")]
    assert board.splitlines()[2].startswith("| rank | model | answered | accuracy | 95% CI |")
    assert "| 1 | C | 12 of 40 · incomplete | 91.67 |" in board and "| 3 | A | 40 of 40 | 50.00 |" in board
    assert "**Ranked over the 12 items every run has an outcome for (of 40; a failed query counts as wrong)" in board
    assert "C has no record of 28 queries that other runs have; their items are left out for every model" in text

    out = io.StringIO()
    print_comparison(c, Console(file=out, width=120))
    row = next(line for line in out.getvalue().splitlines() if [cell.strip() for cell in line.split("│")[2:3]] == ["C"])
    assert "12 of 40 · incomplete" in row
    assert "Ranked over the 12 items every run has an outcome for" in out.getvalue()

    runs = [SimpleNamespace(label=k, summary=json.loads((d / "summary.json").read_text())) for k, d in dirs.items()]
    assert {r["label"]: r["incomplete"] for r in leaderboard(runs)} == \
        {"A": None, "B": None, "C": "incomplete: 12 of 40 answered"}


def test_complete_runs_are_compared_as_before_and_runs_with_nothing_in_common_refused(tmp_path):
    a = make_run(tmp_path / "a", "A", [record(str(i), i % 2 == 0) for i in range(10)])
    b = make_run(tmp_path / "b", "B", [record(str(i), i % 3 == 0) for i in range(10)])
    c = compare([a, b], out=tmp_path / "cmp", n_boot=50)
    assert c.common is None and "common_items" not in json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert "| rank | model | accuracy |" in (tmp_path / "cmp" / "report.md").read_text()
    other = make_run(tmp_path / "o", "O", [record(f"x{i}", True) for i in range(5)])
    with pytest.raises(EvalkitError, match="no item was answered by every run"):
        compare([a, other], n_boot=0)
