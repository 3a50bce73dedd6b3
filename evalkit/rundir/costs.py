"""A summary.json read from disk, its list cost completed: 0.4 writes `usage.list_cost_usd`; a summary
written before has none, and compare, the viewer and export compute it from the run's records at the price
its config recorded, so runs of 0.3 and 0.4 show their costs side by side (evalkit/money/shown.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalkit.core.record import Record
from evalkit.money.costs import list_fields
from evalkit.rundir.rows import price_in


def with_list_cost(summary: dict[str, Any], config: Mapping[str, Any] | None,
                   records: Iterable[Record]) -> dict[str, Any]:
    """`summary` as it is when it holds a list cost; else a copy whose usage has one, from `records` (the
    run's scored records) at the price `config` (config.json's, or the summary's own) recorded."""
    usage = summary.get("usage")
    if not isinstance(usage, dict) or "list_cost_usd" in usage:
        return summary
    given = config if isinstance(config, Mapping) and "price" in config else summary.get("config") or {}
    return {**summary, "usage": {**usage, **list_fields(price_in(given), list(records))}}
