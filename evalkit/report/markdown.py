"""report.md: the official table first, then counts, parse methods and the run's settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .tables import count_rows, metric_rows


def _table(rows: list[tuple[str, str]], head: tuple[str, str]) -> list[str]:
    out = [f"| {head[0]} | {head[1]} |", "|---|---:|"]
    out += [f"| {a} | {b} |" for a, b in rows]
    return out


def render_report(summary: dict[str, Any]) -> str:
    lines = [f"# {summary['benchmark']} — {summary['model']}", "",
             f"Mode: **{summary['mode']}** · items {summary['n_items']} · queries {summary['n_queries']}"
             f" · evalkit {summary['evalkit_version']}", ""]
    if not summary.get("complete", True):
        lines += ["> **Incomplete run**: some queries are missing or failed; re-run the same command to resume.", ""]
    lines += ["## Official metrics", "", *_table(metric_rows(summary["metrics"]), ("metric", "value")), ""]
    lines += ["## Counts", "", *_table(count_rows(summary), ("what", "n")), ""]
    methods = summary.get("parse_methods") or {}
    if methods:
        lines += ["## How answers were obtained", "", *_table([(k, str(v)) for k, v in methods.items()],
                                                              ("parse method", "n")), ""]
    if summary.get("hint"):
        lines += [f"> {summary['hint']}", ""]
    lines += ["## Settings", "", "```json", json.dumps(summary.get("config", {}), indent=2, sort_keys=True), "```", ""]
    return "\n".join(lines)


def write_report(run_dir: Path, summary: dict[str, Any]) -> Path:
    path = Path(run_dir) / "report.md"
    path.write_text(render_report(summary), encoding="utf-8")
    return path
