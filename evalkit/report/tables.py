"""Flatten a summary into (label, value) rows: shared by the console and report.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.money.shown import costs_line


def decimals(table: dict[str, Any]) -> int:
    """Digits after the point for a report table (summary "tables" entry): its own `decimals` when the
    paper prints a set number (IF-Bench: 1), else three for fractions (TDBench's 0–1) and two otherwise."""
    if isinstance(table.get("decimals"), int):
        return table["decimals"]
    return 3 if table.get("units") == "0–1" else 2


def fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
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


def outcome_keys(counts: dict[str, Any]) -> tuple[str, ...]:
    """The outcome counts a report shows: cut-offs only where there are some (runs before them and
    runs without them read as they always did)."""
    base = ("correct", "wrong", "unparsed", "errors", "refusals")
    base = (*base, "data_errors") if counts.get("data_errors") else base
    return (*base, "cutoffs") if counts.get("cutoffs") else base


def count_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    c = summary.get("counts", {})
    u = summary.get("usage", {})
    cache = summary.get("cache", {})
    rows = [(k, fmt(c.get(k, 0))) for k in outcome_keys(c)]
    rows += [("queries", f"{summary.get('n_queries')} ({summary.get('missing', 0)} missing)")]
    this_run = summary.get("this_run")
    if this_run:  # what this command did; the cache counts below are over every answer, from any run
        rows.append(("this run", f"{this_run['sent']:,} sent · {this_run['from_cache']:,} from the cache · "
                                 f"{this_run['already']:,} already answered"))
    rows += [("cache hits / misses", f"{cache.get('hits', 0)} / {cache.get('misses', 0)}"),
             ("input / output tokens", f"{u.get('input_tokens', 0):,} / {u.get('output_tokens', 0):,}"),
             ("cost", costs_line(summary))]
    methods = summary.get("parse_methods") or {}
    if methods:
        rows.append(("parse methods", " · ".join(f"{k} {v}" for k, v in methods.items())))
    return rows


def md_table(head: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "", digits: int = 2) -> list[str]:
    """A markdown table; `align` has one of l/r per column (default: first left, the rest right),
    floats with `digits` after the point."""
    align = align or "l" + "r" * (len(head) - 1)
    rule = "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"
    return ["| " + " | ".join(head) + " |", rule] + ["| " + " | ".join(fmt(c, digits) for c in row) + " |" for row in rows]


def pct_ci(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}]"


def pvalue(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-4 else "<1e-4"


def reliability_rows(label: str, rel: dict[str, Any]) -> list[Any]:
    """One row of θ, r, g (ML fit, with the paper's moment solution where it exists)."""
    ml, paper = rel.get("ml") or {}, rel.get("paper") or {}
    return [label, rel.get("k"), rel.get("groups"), rel.get("RE"), rel.get("VE"), rel.get("MA"),
            ml.get("theta"), ml.get("r"), ml.get("g"), ml.get("A_adj"),
            " / ".join(f"{paper[k]:.2f}" for k in ("theta", "r", "g")) if paper else "no solution"]


RELIABILITY_HEAD = ("model", "k", "groups", "RE", "VE", "MA", "θ", "r", "g", "A_adj", "paper θ / r / g")
