"""The console view of a finished run (rich tables)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from evalkit.core.findings import count_line
from evalkit.data.source import data_named
from evalkit.grading.failures import banner
from evalkit.metrics.analysis.sample_note import estimate_note, sample_of, shown_tables
from evalkit.money.shown import costs_line
from evalkit.report.sample_line import sample_interval, sample_line
from evalkit.report.tables import count_rows, decimals, fmt, metric_rows, outcome_keys, pct_ci, pvalue

if TYPE_CHECKING:
    from evalkit.metrics.analysis.comparison import Leaderboard


def _metrics_table(title: str, metrics: dict[str, Any]) -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in metric_rows(metrics):
        table.add_row(k, v)
    return table


def _paper_table(t: dict[str, Any], width: int) -> tuple[Table, int]:
    """(the table, the width it takes): compact (a header rule, no frame), one line per row. It fits
    `width` where it can: a space either side of each column's rule when the whole row label fits with
    them, none when it fits only without, and the row labels shortened with "…" (to 12 characters at
    least) when nothing else is left; report.md has them whole. A table whose numbers alone are wider
    takes the width it needs: a column is never dropped (print_table)."""
    from rich import box

    digits = decimals(t)
    cells = [[fmt(v, digits) for v in row] for row in t["rows"]]
    heads = [name.replace(" ", "\n", 1) if i and " " in name else name  # "RGB-Txt QAcc" over two lines
             for i, name in enumerate(t["head"])]
    widths = [max([len(row[i]) for row in cells if i < len(row)] + [len(p) for p in heads[i].split("\n")])
              for i in range(len(heads))]
    pad, first, needed = table_layout(widths, width)
    table = Table(title=t["title"], show_header=True, header_style="bold", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, pad))
    for i, name in enumerate(heads):
        if i == 0:
            table.add_column(name, no_wrap=True, overflow="ellipsis", width=first)
        else:
            table.add_column(name, justify="right", no_wrap=True, min_width=widths[i])
    groups = set(t.get("groups") or [])
    for row, text in zip(t["rows"], cells, strict=True):
        table.add_row(*text, style="bold" if row and row[0] in groups else None)
    if t.get("note"):
        table.caption, table.caption_justify = t["note"], "left"
    return table, needed


def table_layout(widths: list[int], width: int, shortest: int = 12) -> tuple[int, int, int]:
    """(padding either side of a column's rule, the first column's width, the table's width) of a
    SIMPLE_HEAD table without edge padding whose columns need `widths`, within `width` where it can.
    Such a table is its columns, a rule character at each edge and between columns, and 2 × padding
    between columns."""
    n, rest = len(widths), sum(widths[1:])
    for pad in (1, 0):
        needed = widths[0] + rest + n + 1 + 2 * pad * (n - 1)
        if needed <= width:
            return pad, widths[0], needed
    first = max(min(widths[0], shortest), width - (rest + n + 1))
    return 0, first, first + rest + n + 1


def print_table(console: Console, table: Table, needed: int) -> None:
    """`table` as wide as it needs: wider than the console it is rendered at its own width, uncropped
    (rich would squeeze it to the console's width, 80 when the output is not a terminal, and cut off
    its last columns)."""
    if needed <= console.width:
        console.print(table)
        return
    from rich.segment import Segments

    console.print(Segments(list(console.render(table, console.options.update_width(needed)))), crop=False)


def _field_lines(fields: list[str], width: int) -> list[str]:
    """`fields` joined by " · " into lines of at most `width`, broken only between fields
    (a count is never split from its label)."""
    lines: list[str] = []
    for field in fields:
        if lines and len(lines[-1]) + 3 + len(field) <= width:
            lines[-1] += " · " + field
        else:
            lines.append(field)
    return lines


def print_summary(summary: dict[str, Any], console: Console, out_dir: str | None = None) -> None:
    """The error banner first when queries failed (and no metric at all when nothing was answered),
    then the official metrics, the metrics over answered queries, and the counts."""
    title = f"{summary['benchmark']} · {summary['model']} · {summary['mode']}"
    failures = summary.get("failures")
    for line in banner(summary):
        console.print(line, style="bold red", markup=False, highlight=False)
    if not failures or failures["answered"]:
        official = title + (" · failed queries count as wrong" if failures else "")
        shown = [t for t in shown_tables(summary, marked=False) if t.get("console")]  # a sample's: some left out
        if shown:  # the paper's table and the main detail table; everything else is in report.md
            console.print(official, style="bold", markup=False, highlight=False)
            sample = sample_of(summary)
            if sample is not None:  # a sample's tables are estimates: said once, above them
                console.print(f"tables: {estimate_note(sample)}", style="yellow", markup=False, highlight=False,
                              soft_wrap=True)
            for t in shown:
                if t.get("left_out"):
                    console.print(t["left_out"], style="yellow", markup=False, highlight=False, soft_wrap=True)
                else:
                    print_table(console, *_paper_table(t, console.width))
        else:  # a summary written before tables existed
            console.print(_metrics_table(official, summary["metrics"]))
        h = summary.get("headline")
        sampled = sample_interval(summary)
        if sampled:  # a bootstrap assumes a size fixed in advance; a sample stopped on its answers did not
            console.print(sampled, markup=False, highlight=False, soft_wrap=True)
        elif h:
            console.print(f"{h['metric']} = {fmt(h['value'])}, 95% CI {pct_ci(*h['ci95'])} "
                          f"(bootstrap over {h['n_units']} items)", highlight=False)
    if summary.get("metrics_answered"):
        console.print(_metrics_table(f"metrics_answered · over the {failures['answered']:,} answered queries only",
                                     summary["metrics_answered"]))
    findings = count_line(summary.get("findings") or [])
    if findings:
        console.print(findings, style="yellow", markup=False, highlight=False)
    rows = dict(count_rows(summary))
    outcomes = (*outcome_keys(summary.get("counts", {})), "queries")
    for fields in ([f"{k} {rows[k]}" for k in outcomes], [f"{k} {v}" for k, v in rows.items() if k not in outcomes]):
        for line in _field_lines(fields, console.width):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if summary.get("hint"):
        console.print(f"[yellow]{summary['hint']}[/yellow]")
    data_only = summary.get("data_errors") and not failures and not summary.get("missing")
    sample = sample_line(summary)
    if sample:  # a sample is not the whole set: say how far it went, not "incomplete"
        console.print(sample, style="bold", markup=False, highlight=False, soft_wrap=True)
    elif not summary.get("complete", True) and not data_only:  # a re-run cannot mend data: the banner says so
        console.print("[red]incomplete: some queries failed or are missing; re-run the same command to resume[/red]")
    used = data_named(summary)
    if used:  # which data, every source: at its commit, or the path with its content's sha256 (whole, one line)
        console.print(f"data: {used}", markup=False, highlight=False, soft_wrap=True)
    if out_dir:  # whole on one line, so it can be copied (rich breaks long lines at the console's width)
        console.print(f"run directory: {out_dir}", markup=False, highlight=False, soft_wrap=True)


def print_dry_run(summary: dict[str, Any], console: Console) -> None:
    d = summary["dry_run"]

    def money(v: float | None) -> str:
        return "unknown (no price)" if v is None else f"${v:,.4f}"

    table = Table(title=f"dry run · {summary['benchmark']} · {summary['model']}", show_header=False)
    if d.get("data"):
        table.add_row("data", d["data"])
    if "download_bytes" in d:
        table.add_row("to download", f"{d['download_files']:,} files, {d['download_bytes'] / 1e9:,.2f} GB")
    if "questions" in d:
        table.add_row("questions (published)", f"{d['questions']:,}")
    if "n_queries" not in d:  # the data is not here yet: nothing to count
        console.print(table)
        for note in d.get("notes", []):
            console.print(f"[yellow]{note}[/yellow]")
        console.print("nothing was sent or downloaded")
        return
    table.add_row("queries", f"{d['n_queries']:,}")
    table.add_row("already in the run directory", f"{d['already_done']:,}")
    table.add_row("answered from the cache", f"{d['cached']:,}")
    table.add_row("to send", f"{d['to_send']:,}")
    table.add_row("input tokens (est.)", f"{d['input_tokens']:,}")
    table.add_row("output tokens (est.)", f"{d['output_tokens_low']:,} – {d['output_tokens_high']:,}")
    tier = f", --service-tier {d['service_tier']}" if d.get("service_tier") else ""  # priced at the tier asked
    table.add_row("cost (est.)" + (", live" if d.get("batch") else "") + tier,
                  f"{money(d['cost_low_usd'])} – {money(d['cost_high_usd'])}")
    if d.get("batch"):
        table.add_row("cost (est.), --batch", f"{money(d['batch_cost_low_usd'])} – {money(d['batch_cost_high_usd'])}")
    if d.get("spent_usd") is not None or d.get("shared_budget"):
        table.add_row("already spent in the run directory", money(d.get("spent_usd")))
    if d.get("shared_budget"):
        table.add_row(f"already spent in shared budget {d['shared_budget']}", money(d.get("shared_spent_usd")))
    if "budget_left_usd" in d:
        table.add_row(f"left of --max-cost {money(d['max_cost_usd'])}", money(d["budget_left_usd"]))
    console.print(table)
    for note in d.get("notes", []):
        console.print(f"[yellow]{note}[/yellow]")
    console.print("nothing was sent" + (" or downloaded" if "download_bytes" in d else ""))


def print_comparison(c: Leaderboard, console: Console, report: str | None = None) -> None:
    """The leaderboard and the significant gaps, as the console shows them."""
    marked = c.any_incomplete  # how much of each run there is, when some run is incomplete
    table = Table(title=f"{c.benchmark} · {len(c.results)} models", header_style="bold")
    for name, justify in (("rank", "right"), ("model", "left"), *([("answered", "right")] if marked else []),
                          (c.metric or "score", "right"), ("95% CI", "right"), ("significantly above", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, m in enumerate(c.results, start=1):
        table.add_row(str(rank), m.label, *([c.runs[m.label].marker()] if marked else []), fmt(m.estimate),
                      pct_ci(m.ci.lo, m.ci.hi) if m.ci else "—", ", ".join(c.beats(m.label)) or "—")
    console.print(table)
    # the costs beside the table, not in it: a column of them would squeeze the models' names
    console.print("cost: " + "; ".join(f"{m.label} {costs_line(c.runs[m.label].summary)}" for m in c.results),
                  markup=False, highlight=False, soft_wrap=True)
    if c.common is not None:
        console.print(f"{c.common.method[0].upper()}{c.common.method[1:]}", style="bold", markup=False,
                      highlight=False)
    for d in c.decided or ():
        console.print(f"  until decided: {d.a} vs {d.b}: {d.verdict}: Δ {d.difference:+.2f} "
                      f"[{fmt(d.interval[0])}, {fmt(d.interval[1])}], anytime p {pvalue(d.p_value)}",
                      markup=False, highlight=False, soft_wrap=True)
    for t in c.pairs:
        mark = "[green]significant[/green]" if t.significant else "not significant"
        console.print(f"  {t.a} vs {t.b}: Δ {t.diff.estimate:+.2f} {pct_ci(t.diff.lo, t.diff.hi)}, "
                      f"p {pvalue(t.p)}, Holm p {pvalue(t.p_holm)}: {mark}", highlight=False)
    for note in c.notes:
        console.print(f"[yellow]{note}[/yellow]")
    if report:
        console.print(f"report: {report}", markup=False, highlight=False, soft_wrap=True)
