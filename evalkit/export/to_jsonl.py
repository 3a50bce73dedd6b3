"""`--to jsonl`: one JSON object per query, every run's rows in one file (the `run` key names the run
directory). Values keep their types: the variant an object, verdicts true/false/null, costs numbers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from evalkit.export.rows import query_rows
from evalkit.export.runs import ExportRun


def write_jsonl(runs: Iterable[ExportRun], out: Path) -> int:
    """Write the rows to `out`; returns how many."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for row in query_rows(runs):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, out)
    return n
