"""A stray double quote in a TSV must not swallow rows silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_data import draw_image

from evalkit.benchmarks.readers.mcq import load_tsv
from evalkit.cli import main
from evalkit.core.errors import EvalkitError

HEADER = "index\tquestion\tA\tB\tanswer\timage_path\n"


def _tsv(tmp_path: Path, questions: list[str]) -> Path:
    draw_image(1, 64).save(tmp_path / "p.png")
    rows = "".join(f"{i}\t{q}\tred\tblue\tA\tp.png\n" for i, q in enumerate(questions, start=1))
    path = tmp_path / "set.tsv"
    path.write_text(HEADER + rows, encoding="utf-8")
    return path


@pytest.mark.parametrize(("second", "fourth", "last_line"), [
    ('"Quoted start, never closed', "Four?", 7),  # swallows the rest of the file
    ('"Two', 'Four"', 5),  # closed three lines later: rows 2-4 become one plausible item (0.1.0: 4 items, exit 0)
])
def test_a_stray_quote_is_an_error_naming_the_row_and_line(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          second: str, fourth: str, last_line: int) -> None:
    path = _tsv(tmp_path, ["Colour?", second, "Three?", fourth, "Five?", "Six?"])
    with pytest.raises(EvalkitError, match=rf"row 2 \(ending on line {last_line}\).*unbalanced double quote"):
        load_tsv(path)
    code = main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9", "--data", str(path),
                 "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "set.tsv: row 2" in err and "\n" not in err


def test_well_formed_quoted_fields_still_load(tmp_path: Path) -> None:
    path = _tsv(tmp_path, ["One?", '"A quoted question, with a comma"', '"Two lines:\nsecond line"', "Four?",
                           'He said "hi"', "Six?"])
    items = load_tsv(path)
    assert [i.id for i in items] == ["1", "2", "3", "4", "5", "6"]
    assert items[1].question == "A quoted question, with a comma"
    assert items[2].question == "Two lines:\nsecond line" and items[4].question == 'He said "hi"'
