"""A titled table of a run's numbers, as a paper prints it: what the console and report.md show first.

Each benchmark builds its own from its metrics (`Benchmark.tables`): the paper's headline table
as one row, in the paper's column order and units, then evalkit's detail tables. They are kept
in summary.json ("tables"), so every reader (console, report.md, compare) shows the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ReportTable:
    title: str
    head: tuple[str, ...]
    rows: list[list[Any]]
    note: str | None = None
    console: bool = False  # shown on the console too (the headline table and the main detail table)
    units: str = "%"  # what the numbers are ("%", "0–1", ...)
    groups: list[str] = field(default_factory=list)  # row labels that are group rows (bold in reports)
    decimals: int | None = None  # digits after the point as the paper prints them (None: by units)
    # why the table needs every item of the set: a sampled run (summary "sample") leaves it out and
    # says so. None: its numbers are means over items, which a sample estimates (and is marked so)
    whole_set: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"title": self.title, "head": list(self.head), "rows": self.rows, "note": self.note,
               "console": self.console, "units": self.units, "groups": self.groups}
        if self.decimals is not None:
            out["decimals"] = self.decimals
        return out if self.whole_set is None else {**out, "whole_set": self.whole_set}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ReportTable:
        return ReportTable(d["title"], tuple(d["head"]), d["rows"], d.get("note"), bool(d.get("console")),
                           d.get("units", "%"), list(d.get("groups") or []), d.get("decimals"),
                           d.get("whole_set"))
