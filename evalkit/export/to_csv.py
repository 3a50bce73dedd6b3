"""`--to csv`: one row per query, every run's rows in one file (the `run` column names the run directory).

A variant is its JSON text ({"shift": 1}); true/false for flags and verdicts; an empty cell where a value
is unknown (no answer, no price). Written under a temporary name and renamed, so a kill leaves no half file.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalkit.export.rows import COLUMNS, query_rows
from evalkit.export.runs import ExportRun


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def write_csv(runs: Iterable[ExportRun], out: Path) -> int:
    """Write the rows to `out`; returns how many."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in query_rows(runs):
            writer.writerow([cell(row[c]) for c in COLUMNS])
            n += 1
    os.replace(tmp, out)
    return n
