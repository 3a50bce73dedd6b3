"""Flatten a summary into (label, value) rows: shared by the console and report.md."""

from __future__ import annotations

from typing import Any


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if value is None:
        return "—"
    return str(value)


def metric_rows(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """Top-level numbers first, then one row per entry of each nested table ("per_category / x")."""
    rows: list[tuple[str, str]] = []
    nested: list[tuple[str, dict]] = []
    for k, v in metrics.items():
        if isinstance(v, dict):
            nested.append((k, v))
        elif not isinstance(v, list):
            rows.append((k, fmt(v)))
    for k, table in nested:
        for sub, v in table.items():
            if not isinstance(v, dict | list):
                rows.append((f"{k} / {sub}", fmt(v)))
    return rows


def count_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    c = summary.get("counts", {})
    u = summary.get("usage", {})
    cache = summary.get("cache", {})
    rows = [(k, fmt(c.get(k, 0))) for k in ("correct", "wrong", "unparsed", "errors", "refusals")]
    rows += [("queries", f"{summary.get('n_queries')} ({summary.get('missing', 0)} missing)"),
             ("cache hits / misses", f"{cache.get('hits', 0)} / {cache.get('misses', 0)}"),
             ("input / output tokens", f"{u.get('input_tokens', 0):,} / {u.get('output_tokens', 0):,}"),
             ("cost (USD)", fmt(u.get("cost_usd")))]
    methods = summary.get("parse_methods") or {}
    if methods:
        rows.append(("parse methods", " · ".join(f"{k} {v}" for k, v in methods.items())))
    return rows
