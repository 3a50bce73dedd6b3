"""A TSV row with more cells than the header has columns is an error naming file and row (issue 31 item 16b).

csv files the cells past the header's last column under no name, and every TSV reader dropped them
silently (a hint typed into a column the header does not name; a tab inside a question that moves
the row's cells right). Now it is one line naming the file, the row and the lost cells: exit 2 for a run, a
finding for lint. Empty cells past the end (a trailing tab) lose nothing and still pass.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from cli_under_test import run_main
from PIL import Image

from evalkit.benchmarks.lenient import Sink
from evalkit.benchmarks.readers.mcq import load_tsv

HEADER = "index\timage\tquestion\tA\tB\tC\tD\tanswer\tcategory"
SAID = ("row 2 (ending on line 3): 10 cells for the header's 9 columns ('see figure 2' beyond the last); a tab inside "
        "a cell, or a column with no name in the header")


def _png() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (40, 40), (20, 90, 200)).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture
def shifted(tmp_path: Path) -> Path:
    """Row 2 has a cell past the header's last column (a hint the header does not name): it was dropped."""
    path = tmp_path / "set.tsv"
    path.write_text("\n".join([
        HEADER,
        f"1\t{_png()}\tWhich colour?\tred\tblue\tgreen\tgrey\tB\tcolour",
        "2\t1\tWhich colour?\tred\tblue\tgreen\tgrey\tB\tcolour\tsee figure 2",  # a hint with no column
        "3\t1\tWhich shade?\tred\tblue\tgreen\tgrey\tC\tcolour\t\t",  # trailing tabs: empty cells, nothing lost
    ]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["csv", "streamed"])
def test_a_row_with_cells_past_the_header_is_named(shifted, stream):
    with pytest.raises(Exception, match=r"^" + str(shifted) + ": " + SAID.replace("(", r"\(").replace(")", r"\)")):
        load_tsv(shifted, stream=stream)
    sink = Sink(lenient=True)
    items = load_tsv(shifted, sink=sink, stream=stream)
    assert [it.id for it in items] == ["1", "3"]
    assert [(p.row, p.message) for p in sink.problems] == [("row 2", SAID)]


def test_run_stops_with_one_line_and_lint_names_the_row(shifted, tmp_path):
    out = tmp_path / "run"
    proc = run_main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--data", str(shifted),
                    "--out", str(out), "--no-cache", "--no-progress"], env={"VLLM_API_KEY": "k"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [f"evalkit: error: {shifted}: {SAID}"]
    assert not out.exists()
    lint = run_main(["lint", "mcq", "--data", str(shifted), "--no-cache", "--json"])
    assert lint.returncode == 1, lint.stderr[-2000:]
    assert "10 cells for the header's 9 columns" in lint.stdout and '"row 2"' in lint.stdout


def test_tdbench_grounding_rows_are_checked_alike(tmp_path):
    from evalkit.benchmarks.readers.tdbench import _grounding_rows

    path = tmp_path / "grounding.tsv"
    path.write_text("index\timage\tquestion\tanswer\n"
                    f"1\t{_png()}\tthe cup\t[1, 2, 10, 12]\n"
                    f"2\t{_png()}\tthe pen\t[1, 2, 10, 12]\tleft over\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"row 2 \(ending on line 3\): 5 cells for the header's 4 columns "
                                        r"\('left over' beyond the last\)"):
        _grounding_rows(path)
