"""What every run and re-report leaves behind: summary.json with its headline interval, report.md, plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.benchmarks.base import Benchmark
from evalkit.core.record import Record
from evalkit.core.types import DATA_ERROR
from evalkit.grading.failures import nothing_answered
from evalkit.metrics.analysis.result import ModelResult, analyze
from evalkit.report.markdown import write_report

if TYPE_CHECKING:
    from evalkit.report.figures import Plotter


class RunFolder(Protocol):
    """Where a run's files go (the engine's RunDir): its folder, and how summary.json is written."""

    path: Path

    def write_summary(self, summary: dict[str, Any]) -> None: ...


def publish(rundir: RunFolder, summary: dict[str, Any], bench: Benchmark, records: Sequence[Record],
            options: dict[str, Any], *, plots: bool = True, figures: bool = True) -> ModelResult:
    """Analyse the graded records, add the headline's interval to the summary, write all three.

    summary.json and report.md come first; the plots follow (not redrawn when what they show is
    unchanged). With plots=False only the first two are written and the caller draws the plots
    later with draw_plots (report.md already names them), e.g. after other work that must not
    delay the summary. figures=False (--no-plots): no plots now or later, and report.md names none."""
    figures = figures and not nothing_answered(summary)
    records = [r for r in records if r.error != DATA_ERROR]  # the data's failures are never the model's
    analysis = analyze(summary["model"], bench, records, options, chance=summary.get("chance_pct"),
                       category_chance=summary.get("chance_per_category"))
    summary["headline"] = analysis.headline_dict()
    rundir.write_summary(summary)
    write_report(rundir.path, summary, analysis, draw=plots and figures, figures=figures)
    return analysis


def draw_plots(rundir: RunFolder, summary: dict[str, Any], analysis: ModelResult,
               plotter: Plotter | None = None, memo: Path | None = None) -> None:
    """The plots of a `publish(..., plots=False)`, by `plotter` when one is given; `memo`: the cache
    folder's figures drawn before (report/figure_memo.py), copied when they show the same."""
    if not nothing_answered(summary):
        write_report(rundir.path, summary, analysis, draw=True, rewrite=False, plotter=plotter, memo=memo)
