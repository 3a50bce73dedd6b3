r"""`--to csv` and `--to jsonl`: one row per query, every run's rows in one file (the `run` column or key
names the run directory): what was asked of which model, what it answered, how that was judged, and at
what latency, tokens and cost, the same rows as `RunResult.to_rows()` gives in Python (rundir/rows.py
makes both).

CSV: a variant is its JSON text ({"shift": 1}); true/false for flags and verdicts; an empty cell where a
value is unknown (no answer, no price). Spreadsheets run a cell that starts like a formula, and a
model's answer (or an id or category from the data) is text someone else wrote: text cells are
neutralised as OWASP's "CSV Injection" page recommends (read 2026-11-29), a leading `'` before `=`,
`+`, `-`, `@`, tab or CR, and control characters (NUL, BEL, ESC, ...) written as `\uXXXX`. Numbers
(costs, tokens, latencies) stay numbers. JSON Lines: values keep their types and text is exact (the
variant an object, verdicts true/false/null, costs numbers). Each file is written under a temporary
name and renamed, so a kill leaves no half file.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from evalkit.export.runs import ExportRun
from evalkit.rundir.rows import COLUMNS, query_rows


def _rows(runs: Iterable[ExportRun]) -> Iterator[dict[str, Any]]:
    """Every run's queries, run by run, in the order of its records.jsonl."""
    for run in runs:
        yield from query_rows(run.records, run.price, run=run.name, benchmark=run.benchmark)


#: What a spreadsheet reads as the start of a formula (OWASP, CSV Injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: Control characters a terminal or spreadsheet may act on; tab, LF and CR inside a cell are CSV's to quote.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def cell(value: Any) -> str:
    """A value as CSV text: numbers as they are, text neutralised (see the module's docstring)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    text = json.dumps(value, ensure_ascii=False, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
    return safe_text(text)


def safe_text(text: str) -> str:
    """Text a spreadsheet shows as text: control characters as `\\uXXXX`, a formula's first character
    behind a `'` (an answer `-3` is written `'-3`)."""
    text = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def write_csv(runs: Iterable[ExportRun], out: Path) -> int:
    """Write the rows to `out` as CSV (COLUMNS is the header's order); returns how many."""
    def write(f: IO[str]) -> int:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        n = 0
        for row in _rows(runs):
            writer.writerow([cell(row[c]) for c in COLUMNS])
            n += 1
        return n

    return _replace(out, write, newline="")


def write_jsonl(runs: Iterable[ExportRun], out: Path) -> int:
    """Write the rows to `out` as JSON Lines (the keys are COLUMNS); returns how many."""
    def write(f: IO[str]) -> int:
        n = 0
        for row in _rows(runs):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
        return n

    return _replace(out, write)


def _replace(out: Path, write: Callable[[IO[str]], int], newline: str | None = None) -> int:
    """`write` into a temporary file beside `out`, then renamed to it; returns what `write` returned."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline=newline) as f:
        n = write(f)
    os.replace(tmp, out)
    return n
