"""One row per query: what was asked of which model, what it answered, how that was judged, and at
what latency, tokens and cost. The CSV and JSON Lines exports write these rows, the same as
`RunResult.to_rows()` gives in Python (engine/rows.py makes both)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from evalkit.engine.rows import COLUMNS, query_row
from evalkit.export.runs import ExportRun

__all__ = ["COLUMNS", "query_rows"]  # COLUMNS: the CSV header's order; JSON Lines rows hold the same keys


def query_rows(runs: Iterable[ExportRun]) -> Iterator[dict[str, Any]]:
    """Every run's queries, run by run, in the order of its records.jsonl."""
    for run in runs:
        price = run.price
        for r in run.records:
            yield query_row(r, price, run=run.name, benchmark=run.benchmark)
