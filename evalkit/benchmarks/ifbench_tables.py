"""IF-Bench's tables for the console and report.md, built from `IFBench.aggregate`'s metrics.

First the paper's Table 2 as one row (arXiv 2512.09663: Avg, then the ten dimensions in its column
order, percent with one decimal), then evalkit's dimensions × language table with the strict
(all circular shifts right) score beside it. Pure functions: metrics in, ReportTables out.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.report_table import ReportTable
from evalkit.metrics.ifbench import DIMENSIONS

DECIMALS = 1  # the paper prints percentages with one decimal
LANG_NAMES = {"en": "EN", "cn": "CN"}  # every language IF-Bench has (ifbench_io.LANGS)
# Table 2's column groups, for the note (the paper's two-line header)
GROUPS = (("Coarse-grained Perception", ("SU", "IT", "VC")),
          ("Fine-grained Perception", ("TL", "SRU", "OC", "TFU", "AR")),
          ("Image Reasoning", ("TFR", "CR")))


def languages(metrics: dict[str, Any]) -> list[str]:
    """The languages asked in this run, English first (the order of the paper's appendix tables)."""
    return [lg for lg in LANG_NAMES if isinstance(metrics.get(f"dimensions_{lg}"), dict)]


def paper_table(metrics: dict[str, Any], label: str) -> ReportTable:
    """Table 2 as one row: Avg, then each dimension's score (mean over languages), in the paper's order."""
    dims = metrics.get("dimensions") or {}
    head = ("model", "Avg", *dims)
    groups = " · ".join(f"{name}: {', '.join(c for c in cols if c in dims)}" for name, cols in GROUPS
                        if any(c in dims for c in cols))
    note = ("per dimension: the share of the 4 circular shifts right, mean over items and languages; Avg: "
            "the mean over languages of the dimensions' unweighted mean" + (f" ({groups})" if groups else ""))
    return ReportTable("IF-Bench Table 2: score per dimension (%)", head,
                       [[label, metrics.get("Avg"), *dims.values()]], note=note, console=True, decimals=DECIMALS)


def detail_table(metrics: dict[str, Any]) -> ReportTable:
    """Each dimension × (each language, their mean) and the strict score, then the Avg row."""
    langs = languages(metrics)
    dims = metrics.get("dimensions") or {}
    strict = metrics.get("dimensions_strict") or {}
    full = {short: f"{name} ({short})" for name, short in DIMENSIONS.items()}
    rows = [[full.get(d, d), *(metrics[f"dimensions_{lg}"].get(d) for lg in langs), v, strict.get(d)]
            for d, v in dims.items()]
    rows.append(["Avg", *(metrics.get(f"Avg ({lg})") for lg in langs), metrics.get("Avg"),
                 metrics.get("Avg (strict)")])
    head = ("dimension", *(LANG_NAMES[lg] for lg in langs), "mean", "strict")
    return ReportTable("IF-Bench dimensions × language (%)", head, rows, console=True, decimals=DECIMALS, groups=["Avg"],
                       note="strict: the share of items answered right under every circular shift, mean over "
                            "the languages; the Avg row is the unweighted mean of the dimensions")


def ifbench_tables(metrics: dict[str, Any], label: str) -> list[ReportTable]:
    """The paper's Table 2 row, then dimensions × language."""
    return [paper_table(metrics, label), detail_table(metrics)]
