"""A run's report.md: the official table first, then counts, parser modes, cost, cache and plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.core.findings import SEVERITIES
from evalkit.data.source import data_named
from evalkit.grading.failures import banner
from evalkit.metrics.analysis.sample_note import shown_tables
from evalkit.money.shown import COST_NOTE, costs_line
from evalkit.report.sample_line import sample_interval, sample_line
from evalkit.report.tables import decimals, fmt, md_table, metric_rows, outcome_keys, pct_ci

if TYPE_CHECKING:
    from evalkit.metrics.analysis.result import ModelResult
    from evalkit.report.figures import Plotter


def _headline(summary: dict[str, Any]) -> list[str]:
    h = summary.get("headline")
    sampled = sample_interval(summary)
    if sampled:  # a bootstrap assumes a size fixed in advance; a sample stopped on its answers did not
        return [f"**{sampled}**.", ""]
    if not h:
        return []
    return [f"**{h['metric']} = {fmt(h['value'])}**, 95% CI {pct_ci(*h['ci95'])} "
            f"(percentile bootstrap over {h['n_units']} items).", ""]


def _bold(t: dict[str, Any]) -> list[list[Any]]:
    groups = set(t.get("groups") or [])
    return [[f"**{row[0]}**", *row[1:]] if row and row[0] in groups else row for row in t["rows"]]


def _findings(summary: dict[str, Any]) -> list[str]:
    """The data's own faults, beside the scores they affect (errors first)."""
    found = sorted(summary.get("findings") or [], key=lambda f: SEVERITIES.index(f.get("severity", "info")))
    if not found:
        return []
    rows = [[f["severity"], f["kind"], f.get("file") or "", ", ".join(f.get("items") or []), f["message"]]
            for f in found]
    return ["## Data findings", "", *md_table(("severity", "kind", "file", "items", "message"), rows, "lllll"), ""]


def _repeats(summary: dict[str, Any]) -> list[str]:
    """--repeats N: each repeat's official scores with their mean and sample sd, then how the repeats agree."""
    rep = summary.get("repeats")
    if not rep:
        return []
    names = list(dict.fromkeys(k for r in rep["per_repeat"] for k in r["scores"]))
    rows: list[list[Any]] = [[r["repeat"], *(r["scores"].get(k) for k in names)] for r in rep["per_repeat"]]
    rows += [["**mean**", *(rep["mean"].get(k) for k in names)], ["**sd**", *(rep["sd"].get(k) for k in names)]]
    missing = (f", {rep['missing']:,} missing" if rep["missing"] else "") + \
        (f", {rep['errors']:,} failed" if rep.get("errors") else "")
    lines = ["## Repeats", "", f"Every query asked {rep['n']} times ({rep['queries']:,} queries{missing}); the "
             f"official numbers above are repeat 0's. sd: sample standard deviation over the repeats.", "",
             *md_table(("repeat", *names), rows), ""]
    agree = rep.get("agreement") or {}
    if agree.get("queries"):
        lines += [f"Agreement over {agree['queries']:,} queries: **{fmt(agree['all_same_pct'])}%** answered the same "
                  f"in every repeat; the most frequent answer is {fmt(agree['modal_share_pct'])}% of a query's "
                  "answers on average.", ""]
    votes = []
    if rep.get("majority_vote_pct") is not None:
        votes.append(f"majority vote **{fmt(rep['majority_vote_pct'])}%**")
    votes += [f"pass@{k} {fmt(v)}%" for k, v in (rep.get("pass_at_k") or {}).items() if v is not None]
    if votes:
        lines += ["Over the repeats: " + " · ".join(votes) + ".", ""]
    fit = rep.get("reliability")
    if fit:
        lines += [f"The repeats as variants (known/guess mixture over {fit['n']:,} queries, k = {fit['k']}): "
                  f"θ {fmt(fit['theta'])} · r {fmt(fit['r'])} · g {fmt(fit['g'])} · A_adj = θ·r "
                  f"{fmt(fit['A_adj'])}" + (f" ({fit['note']})" if fit.get("note") else "") + ".", ""]
    return lines


def _counts(summary: dict[str, Any]) -> list[str]:
    c = summary.get("counts", {})
    rows = [[k, c.get(k, 0)] for k in outcome_keys(c)]
    rows.append(["queries", f"{summary.get('n_queries')} ({summary.get('missing', 0)} missing)"])
    lines = ["## Counts", "", *md_table(("what", "n"), rows), ""]
    outside = summary.get("not_in_run") or 0
    if outside:
        lines += [f"{outside} record{'s' if outside != 1 else ''} of queries not in this run (items missing, "
                  "skipped or no longer in the data) kept in records.jsonl, not scored.", ""]
    return lines


def _structured(summary: dict[str, Any]) -> list[str]:
    """The line saying `--structured` was on: what asked for a JSON answer, and how many were read from it."""
    block = summary.get("structured")
    if not isinstance(block, dict):
        return []
    return [f"Structured outputs: on (`--structured`): {block.get('queries')} queries asked for their answer as "
            f"JSON in the benchmark's schema; {block.get('read')} answers were read from it, the rest by the rules.",
            ""]


def _parsing(summary: dict[str, Any]) -> list[str]:
    lines = ["## Parsing", ""]
    modes = summary.get("parser_modes")
    if modes:
        lines += [f"Parsed in **{modes['mode']}** mode. Re-parsing the {modes['compared']} rule-read answers in "
                  f"{modes['other_mode']} mode: **{modes['answers_differ']}** answers read differently, "
                  f"**{modes['verdicts_differ']}** verdicts change.", ""]
    methods = summary.get("parse_methods") or {}
    if methods:
        lines += md_table(("parse method", "n"), list(methods.items())) + [""]
    return lines if len(lines) > 2 else []


COST_ROW = "cost"


def restate_cost(report: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """report.md's text with the cost row of `after` where `before`'s was: a re-run that reuses a run's
    outputs (engine/reuse.py) paid nothing, and says so without writing the report again."""
    def row(summary: dict[str, Any]) -> str:
        return md_table(("what", "value"), [[COST_ROW, costs_line(summary)]])[2]

    return report.replace(row(before), row(after), 1)


def _cost(summary: dict[str, Any]) -> list[str]:
    u, cache = summary.get("usage", {}), summary.get("cache", {})
    rows = [["input tokens", f"{u.get('input_tokens', 0):,}"], ["output tokens", f"{u.get('output_tokens', 0):,}"],
            [COST_ROW, costs_line(summary)], ["cache hits", cache.get("hits", 0)],
            ["cache misses", cache.get("misses", 0)]]
    return ["## Cost and cache", "", *md_table(("what", "value"), rows), "", COST_NOTE, ""]


def _with_ci(fit: dict[str, Any], name: str) -> str:
    ci = fit.get(f"{name}_ci")
    return fmt(fit.get(name)) + (f" {pct_ci(*ci)}" if ci else "")


def reliability_section(rel: dict[str, Any]) -> list[str]:
    """θ, r, g told once: the paper's estimator first (moment solution per category, mean over the
    solvable ones, how many had none), then evalkit's maximum-likelihood estimate with intervals;
    a parameter the data cannot identify is "—" with the reason."""
    lines = ["## Reliability over variant groups (θ known, r right when known, g lucky guess)", "",
             f"{rel['groups']} questions asked in k = {rel['k']} variants: RE {fmt(rel['RE'])}, "
             f"VE {fmt(rel['VE'])}, MA {fmt(rel['MA'])}.", ""]
    by_cat = rel.get("paper_by_category")
    if by_cat:
        n = by_cat["solved"] + by_cat["unsolved"]
        lines += [f"**The paper's estimator** (TDBench §4.3): the moment solution per category, averaged over "
                  f"the {by_cat['solved']} of {n} categories that have one ({by_cat['unsolved']} have none).", ""]
        rows = [[cat, *(sol[k] for k in ("theta", "r", "g", "A_adj"))] if sol else [cat, "no solution", "", "", ""]
                for cat, sol in by_cat["per_category"].items()]
        mean = by_cat["mean"]
        rows.append(["**mean**", *(mean[k] for k in ("theta", "r", "g", "A_adj"))] if mean
                    else ["**mean**", "no category has a solution", "", "", ""])
        lines += md_table(("category", "θ", "r", "g", "A_adj = θ·r"), rows) + [""]
    else:
        paper = rel.get("paper")
        lines += ["**The paper's estimator** (TDBench §4.3, moment solution over all questions): "
                  + (" · ".join(f"{k} {fmt(paper[k])}" for k in ("theta", "r", "g", "A_adj")) if paper
                     else "no solution for these RE/VE/MA."), ""]
    ml = rel.get("ml")
    if ml:
        lines += ["**evalkit's estimate**: maximum likelihood over the histogram of right variants per question, "
                  "with 95% bootstrap intervals.", "",
                  *md_table(("θ", "r", "g", "A_adj = θ·r"), [[_with_ci(ml, k) for k in ("theta", "r", "g", "A_adj")]]),
                  ""]
        if ml.get("note"):
            lines += [f"— {ml['note']}.", ""]
    return lines


def _lint(summary: dict[str, Any]) -> list[str]:
    """The data's lint at the start of the run (lint.json): its counts, and each error-level finding
    beside the scores of the categories it affects (those the benchmark's own findings above do not
    already name)."""
    lint = summary.get("lint")
    if not lint or not isinstance(lint.get("counts"), dict):
        return []
    said = {(f.get("kind"), tuple(f.get("items") or ())) for f in summary.get("findings") or []}
    errors = [e for e in lint.get("errors") or [] if (e.get("kind"), tuple(e.get("items") or ())) not in said]
    counts = ", ".join(f"{n} {k}" for k, n in lint["counts"].items() if n) or "nothing found"
    how = f"full check of {lint['reused']}" if lint.get("reused") else "cheap checks; `evalkit lint` runs them all"
    lines = ["## Data checks (lint)", "", f"{counts} ({how}; every finding in {lint.get('file') or 'lint.json'}).", ""]
    if not errors:
        return lines
    rows = [[e["kind"], ", ".join(e.get("items") or []), e["message"],
             "; ".join(_scored(summary.get("metrics") or {}, c) for c in e.get("categories") or []) or "the overall score"]
            for e in errors]
    return lines + md_table(("error", "items", "what", "affects"), rows, "llll") + [""]


def _scored(metrics: dict[str, Any], category: str) -> str:
    """A category with its score where the metrics hold one per category ("Counting (62.5)")."""
    for value in metrics.values():
        found = value.get(category) if isinstance(value, dict) else None
        if isinstance(found, dict):
            found = next((v for v in found.values() if isinstance(v, (int, float)) and not isinstance(v, bool)), None)
        if isinstance(found, (int, float)) and not isinstance(found, bool):
            return f"{category} ({fmt(found)})"
    return category


def render_report(summary: dict[str, Any], analysis: ModelResult | None = None,
                  figures: list[tuple[str, str]] | None = None) -> str:
    used = data_named(summary)
    sample = sample_line(summary)  # a sample says so first: its numbers are estimates of the whole set's
    lines = [sample, ""] if sample else []
    lines += [f"**Data: {used}.**", ""] if used else []
    lines += [f"# {summary['benchmark']} — {summary['model']}", "",
             f"Mode: **{summary['mode']}** · items {summary['n_items']} · queries {summary['n_queries']}"
             f" · evalkit {summary['evalkit_version']}", ""]
    lines += _structured(summary)
    if summary.get("official_source"):
        lines += [f"Official mode follows {summary['official_source']}."
                  + (" Deliberate deviations:" if summary.get("deviations") else ""), ""]
        lines += [f"- {d}" for d in summary.get("deviations") or []] + ([""] if summary.get("deviations") else [])
    if summary.get("throughput"):
        lines += [f"Speed: {throughput_line(summary['throughput'])}.", ""]
    prov = summary.get("provenance") or {}
    if prov.get("served_by"):
        who = ", ".join(f"`{k}` ({v:,})" for k, v in prov["served_by"].items())
        commit = f" at commit {prov['git_commit']}" if prov.get("git_commit") else ""
        lines += [f"Answered by: {who} · evalkit {prov.get('evalkit')}{commit} · details in manifest.json.", ""]
    if summary.get("requests"):
        n = (summary.get("older_requests") or {}).get("queries")
        lines += [f"> Requests: **{summary['requests']}** — {n} answers were asked with an earlier evalkit's "
                  "own prompts; they are kept and graded; `--reask` asks them again with the official requests.", ""]
    failures = summary.get("failures")
    lead = banner(summary)
    if lead:
        lines += [f"> **{lead[0]}**  ", *(f"> {line.strip()}  " for line in lead[1:]), ""]
    elif sample:
        lines += ["> **A sample**: the scores below are over the items asked (estimates of the whole set's; the "
                  "interval above is the headline's); the same command without `--until-ci` completes the set.", ""]
    elif not summary.get("complete", True):
        lines += ["> **Incomplete run**: some queries are missing or failed; re-run the same command to resume.", ""]
    if not failures or failures["answered"]:
        wrong = " (failed queries count as wrong)" if failures else ""
        for t in shown_tables(summary):  # a sample's: marked as estimates, or left out (analysis/sample_note.py)
            if t.get("left_out"):
                lines += [f"_{t['left_out']}._", ""]
                continue
            lines += [f"## {t['title']}{wrong}", "", *md_table(t["head"], _bold(t), digits=decimals(t)), ""]
            lines += [f"_{t['note']}_", ""] if t.get("note") else []
        lines += ["## Official metrics" + wrong, "", *_headline(summary),
                  *md_table(("metric", "value"), metric_rows(summary["metrics"])), ""]
    lines += _repeats(summary) + _findings(summary) + _lint(summary)
    if summary.get("metrics_answered"):
        lines += [f"## metrics_answered: over the {failures['answered']:,} answered queries only", "",
                  *md_table(("metric", "value"), metric_rows(summary["metrics_answered"])), ""]
    lines += _counts(summary) + _parsing(summary) + _cost(summary)
    if summary.get("hint"):
        lines += [f"> {summary['hint']}", ""]
    if analysis is not None and analysis.reliability:
        lines += reliability_section(analysis.reliability)
    if figures:
        lines += ["## Plots", ""]
        for title, rel in figures:
            lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    lines += ["## Settings", "", "```json", json.dumps(summary.get("config", {}), indent=2, sort_keys=True), "```", ""]
    return "\n".join(lines)


def write_report(run_dir: Path, summary: dict[str, Any], analysis: ModelResult | None = None, *,
                 draw: bool = True, rewrite: bool = True, plotter: Plotter | None = None,
                 figures: bool = True, memo: Path | None = None) -> Path:
    """report.md, then with an analysis its plots in plots/ (report.md comes first and names the
    planned figures; the plots are not redrawn when what they show has not changed).
    draw=False: report.md only; rewrite=False: the plots only (report.md is already there);
    figures=False: report.md naming no figure, and no plots; memo: figures drawn before (figure_memo.py)."""
    from evalkit.report import figures as figs

    run_dir = Path(run_dir)
    path = run_dir / "report.md"
    if analysis is None or not analysis.records or not figures:
        if rewrite:
            path.write_text(render_report(summary, analysis, []), encoding="utf-8")
        return path
    plot_dir = run_dir / "plots"
    listed = [(f.title, f.path.relative_to(run_dir).as_posix()) for f in figs.plan_figures(plot_dir, [analysis])]
    if rewrite:
        path.write_text(render_report(summary, analysis, listed), encoding="utf-8")
    if not draw:
        return path
    figures = figs.draw_all(plot_dir, [analysis], plotter=plotter, memo=memo)
    drawn = [(title, p.relative_to(run_dir).as_posix()) for title, p in figures]
    if drawn != listed:  # not what the plan said (draw_all replaced, e.g. in tests): name what is there
        path.write_text(render_report(summary, analysis, drawn), encoding="utf-8")
    return path


def throughput_line(t: dict[str, Any]) -> str:
    """The run's latency and throughput in one line (summary "throughput")."""
    lat = t.get("latency_s") or {}
    latency = (f"latency p50 {lat['p50']:.3g} s · p95 {lat['p95']:.3g} s · max {lat['max']:.3g} s · "
               if lat else "")
    rate = f"{t['requests_per_s']:.3g} requests/s" if t.get("requests_per_s") is not None else ""
    tokens = f" · {t['output_tokens_per_s']:.3g} output tokens/s" if t.get("output_tokens_per_s") else ""
    lim = t.get("limits") or {}
    learned = (f" · limits learned from {'headers' if lim.get('source') == 'headers' else '429s'}: "
               + ", ".join(f"{lim[k]:,.0f} {k}" for k in ("rpm", "tpm") if lim.get(k))) if lim else ""
    capacity = (f"; the tier's capacity refusals: {t['capacity_refused']:,}, sent at standard after them: "
                f"{t.get('tier_fallbacks', 0):,}") if t.get("capacity_refused") else ""
    return (f"{latency}{rate}{tokens} over {t['ask_s']:.3g} s · retries {t['retries']:,} "
            f"(429: {t['rate_limited']:,}{capacity}){learned}")
