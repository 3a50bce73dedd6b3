"""`evalkit run BENCH [BENCH...] --model A --model B ... [--suite FILE]`: the matrix, printed.

The work is multi/matrix.py's; this passes the flags on (each benchmark's own flags to its pairs),
builds each benchmark's `evalkit view` site, and prints a row per pair, what each pair said, the
comparisons and where everything is. The exit code is the matrix's (docs/matrix.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from evalkit.core import settings
from evalkit.core.settings import RunConfig
from evalkit.money.shown import costs_line


def cmd_matrix(args: argparse.Namespace, console: Console) -> int:
    from evalkit.benchmarks import benchmark_class
    from evalkit.multi.matrix import run_matrix
    from evalkit.multi.suite import suite_benchmarks
    from evalkit.view import build_view

    opts = settings.given(args, RunConfig)
    opts.pop("model", None)
    named = dict.fromkeys([*args.bench, *(suite_benchmarks(args.suite) if args.suite else [])])
    for bench in named:  # the flags the parser added for them; each goes to its own benchmark's pairs
        opts.update(settings.given(args, benchmark_class(bench).Options))
    result = run_matrix(args.bench, args.model or [], suite=args.suite, views=build_view, **opts)
    if result.dry_run is not None:
        print_matrix_dry_run(result.dry_run, console)
        return 0
    print_matrix(result, console)
    return result.exit_code


def print_matrix(result: Any, console: Console) -> None:
    """A line per pair (its headline, what was answered, its cost, how it ended, its run directory),
    what each pair said, then each benchmark's comparison and site."""
    from evalkit.metrics.analysis.sample_note import sample_of, sample_tag
    from evalkit.report.console import print_comparison
    from evalkit.report.tables import fmt, pct_ci

    for p in result.pairs:
        s = p.result.summary if p.result is not None else {}
        if not s:
            console.print(f"{p.label}: stopped · {p.error}", style="red", markup=False, highlight=False,
                          soft_wrap=True)
            continue
        h = s.get("headline") or {}
        score = f"{h['metric']} {fmt(h.get('value'))} {pct_ci(*h['ci95'])}" if h.get("ci95") else \
            f"{h.get('metric', 'score')} {fmt(h.get('value'))}"
        n = s.get("n_queries", 0)
        sample = sample_of(s)  # a run that stopped once its answer was known: marked, never the whole set
        share = sample_tag(sample) if sample else f"{n - s.get('missing', 0):,}/{n:,} answered"
        fields = [score, share, f"{(s.get('counts') or {}).get('errors', 0):,} errors", costs_line(s), _ended(p),
                  str(p.result.out_dir)]
        console.print(f"{p.label}: " + " · ".join(fields), markup=False, highlight=False, soft_wrap=True)
    for p in result.pairs:
        for message in p.result.messages if p.result is not None else []:
            console.print(f"{p.label}: {message}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    for comparison in result.comparisons.values():
        print_comparison(comparison, console, str(comparison.out_dir / "report.md"))
    for bench, index in result.sites.items():
        console.print(f"view-{bench}: {index.resolve().as_uri()}", markup=False, highlight=False, soft_wrap=True)
    for message in result.messages:
        console.print(message, style="yellow", markup=False, highlight=False, soft_wrap=True)
    console.print(f"runs: {result.out}", markup=False, highlight=False, soft_wrap=True)
    if result.exit_code == 1:
        console.print("[red]incomplete: some queries failed or are missing; re-run the same command to resume[/red]")


def _ended(p: Any) -> str:
    from evalkit.report.sample_line import sample_line

    if p.result is None:
        return "stopped"
    if p.result.summary.get("complete", True):
        return "complete"
    if p.result.summary.get("stopped") == "sample":  # its rule was satisfied: "stopped at N of M items: ..."
        return sample_line(p.result.summary) or "a sample"
    return "incomplete" if p.exit_code == 1 else "stopped"


def _money(v: float | None) -> str:
    return "cost unknown" if v is None else f"${v:,.4f}"


def print_matrix_dry_run(d: dict[str, Any], console: Console) -> None:
    """What each pair would send and cost, and the matrix's total."""
    table = Table(title=f"dry run · {len(d['pairs'])} runs", header_style="bold")
    for name in ("benchmark", "model", "queries", "cached or done", "to send", "cost (est.)"):
        table.add_column(name, justify="left" if name in ("benchmark", "model") else "right")

    def row(first: str, second: str, x: dict[str, Any]) -> None:
        if "n_queries" not in x:
            table.add_row(first, second, "—", "—", "—", "data not here yet")
            return
        table.add_row(first, second, f"{x['n_queries']:,}", f"{x.get('already_done', 0) + x.get('cached', 0):,}",
                      f"{x['to_send']:,}", f"{_money(x.get('cost_low_usd'))} – {_money(x.get('cost_high_usd'))}")

    for x in d["pairs"]:
        row(x["benchmark"], x["model"], x)
    total = d["total"]
    table.add_section()
    row("total", "", {**total, "n_queries": total.get("n_queries", 0), "to_send": total.get("to_send", 0)})
    console.print(table)
    if total.get("unpriced"):
        console.print(f"no price known for {', '.join(total['unpriced'])}: not in the total cost (--prices FILE "
                      "adds one)", style="yellow", markup=False, highlight=False, soft_wrap=True)
    console.print("nothing was sent")
