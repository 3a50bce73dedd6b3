"""The comparison's report.md and comparison.json: leaderboard first, then the evidence."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.benchmarks import get_benchmark
from evalkit.core.files import write_json_atomic
from evalkit.metrics.analysis.comparison import PAIRED_TEST
from evalkit.money.shown import COST_NOTE, costs_line
from evalkit.report.figures import Plotter, draw_all
from evalkit.report.tables import (
    RELIABILITY_HEAD,
    fmt,
    md_table,
    metric_rows,
    pct_ci,
    pvalue,
    reliability_rows,
)

if TYPE_CHECKING:
    from evalkit.metrics.analysis.comparison import Leaderboard


def _leaderboard(c: Leaderboard) -> list[str]:
    """With common repeats, the headline and the other scores are means over them, with the headline's sd
    across them; counts are repeat 0's (each run's summary), cost every repeat's."""
    bench = get_benchmark(c.benchmark)
    metric = c.metric or "score"
    first = c.runs[c.results[0].label].summary.get("metrics", {})
    extra = [k for k, _ in bench.headline(first) if k != metric]
    sd = [f"sd ({c.repeats.k} repeats)"] if c.repeats else []
    marked = c.any_incomplete  # how much of each run there is, when some run is incomplete
    rows = []
    for rank, m in enumerate(c.results, start=1):
        run = c.runs[m.label]
        metrics = dict(bench.headline(run.summary.get("metrics", {})))
        if m.repeats:
            metrics.update({k: v for k, v in m.repeats.mean.items() if v is not None})
        counts = run.summary.get("counts", {})
        rows.append([rank, m.label, *([run.marker()] if marked else []), m.estimate,
                     pct_ci(m.ci.lo, m.ci.hi) if m.ci else "—",
                     *([m.repeats.sd.get(metric) if m.repeats else None] if sd else []),
                     *[metrics.get(k) for k in extra], counts.get("correct"), counts.get("wrong"),
                     counts.get("unparsed"), counts.get("errors"), costs_line(run.summary),
                     ", ".join(c.beats(m.label)) or "—"])
    head = ["rank", "model", *(["answered"] if marked else []), metric, "95% CI", *sd, *extra, "correct", "wrong",
            "unparsed", "errors", "cost", "significantly above"]
    return md_table(head, rows, "rl" + "r" * (len(head) - 3) + "l")


def _pairs(c: Leaderboard) -> list[str]:
    """Over repeats there is no McNemar (per-item scores are fractions): its columns are left out."""
    rows = []
    for t in c.pairs:
        mc = t.mcnemar
        exact = [] if c.repeats else [mc.only_a if mc else "—", mc.only_b if mc else "—",
                                      pvalue(mc.p) if mc else "—"]
        rows.append([t.a, t.b, t.diff.estimate, pct_ci(t.diff.lo, t.diff.hi), *exact, pvalue(t.p_bootstrap),
                     pvalue(t.p_holm), "**yes**" if t.significant else "no"])
    exact_head = [] if c.repeats else ["right only A", "right only B", "McNemar p"]
    head = ["A", "B", "Δ (A − B)", "95% CI of Δ", *exact_head, "bootstrap p", "Holm p", "significant"]
    return md_table(head, rows, "ll" + "r" * (len(head) - 3) + "l")


def _until_decided(c: Leaderboard) -> list[str]:
    """Which pairs `--until-decided` decided, by which criterion and at how many items, and which it did not."""
    if not c.decided:
        return []
    rows = [[d.a, d.b, d.verdict, d.items, d.difference, f"[{fmt(d.interval[0])}, {fmt(d.interval[1])}]",
             pvalue(d.p_value)] for d in c.decided]
    head = ["A", "B", "decision", "items both answered", "Δ (A − B)", "95% interval (anytime)", "anytime p"]
    return ["## Until decided", "",
            "The models were asked one seeded order of the items, and each pair was decided once its sequential "
            f"paired test rejected (anytime p-values, Holm across the {len(c.decided)} pairs, α = 0.05) or its "
            "difference's interval was within ±W points (--width); an item counts for a pair once both models "
            "answered it (docs/stopping.md).", "", *md_table(head, rows, "lll" + "r" * (len(head) - 3)), ""]


def _repeats(c: Leaderboard) -> list[str]:
    """Each model's headline on each common repeat, their mean and sd."""
    if c.repeats is None:
        return []
    metric, k = c.metric or "score", c.repeats.k
    rows = [[m.label, m.repeats.of_run, *[s.get(metric) for s in m.repeats.per_repeat], m.repeats.mean.get(metric),
             m.repeats.sd.get(metric)] for m in c.results if m.repeats]
    head = ["model", "repeats in run", *[f"repeat {r}" for r in range(k)], "mean", "sd"]
    return [f"## Repeats: {metric} on each of the {k} common repeats", "",
            f"Each repeat scored alone by the benchmark's official aggregate; sd is the sample standard deviation "
            f"across the {k} repeats. Repeats beyond the {k} every run has are not used.", "",
            *md_table(head, rows, "l" + "r" * (len(head) - 1)), ""]


def _all_metrics(c: Leaderboard) -> list[str]:
    """Every official number of every model, side by side (rows as in each run's report)."""
    per_model = {m.label: dict(metric_rows(c.runs[m.label].summary.get("metrics") or {})) for m in c.results}
    names: dict[str, None] = {}
    for rows in per_model.values():
        names.update(dict.fromkeys(rows))
    rows = [[name, *[per_model[m.label].get(name, "—") for m in c.results]] for name in names]
    said = ["Repeat 0's (each run's summary.json).", ""] if c.repeats else []
    return ["## Official metrics, every model", "", *said, *md_table(["metric", *c.ranking], rows), ""]


def _correlation(c: Leaderboard) -> list[str]:
    corr = c.correlation or {}
    rows = [[fam, v["n"], v["pearson"], v["spearman"]] for fam, v in corr.get("per_family", {}).items()]
    if corr.get("mean"):
        rows.append(["**mean over families**", "", corr["mean"]["pearson"], corr["mean"]["spearman"]])
    lines = ["## Score and model size (within families, IF-Bench Table 3)", "",
             *md_table(["family", "models", "Pearson r", "Spearman ρ"], rows), ""]
    if corr.get("skipped"):
        lines += ["Families with fewer than 3 sized models (not correlated): "
                  + ", ".join(f"{k} ({v})" for k, v in corr["skipped"].items()), ""]
    if corr.get("unsized"):
        lines += ["Models without a size: " + ", ".join(corr["unsized"]), ""]
    return lines


def render_comparison(c: Leaderboard, figures: list[tuple[str, Path]], out: Path) -> str:
    n = len(c.results)
    tested = "exact McNemar on per-question correctness" if any(t.mcnemar for t in c.pairs) else \
        "paired bootstrap (scores are not right/wrong per question)"
    said = f"95% CI: percentile bootstrap over items. *Significantly above*: {tested}"
    if c.repeats is not None:
        said = (f"{c.repeats.method[0].upper()}{c.repeats.method[1:]} (repeats 0–{c.repeats.k - 1}). "
                f"95% CI: percentile bootstrap over items. *Significantly above*: {PAIRED_TEST}")
    lines = [f"# {c.benchmark}: {n} models compared", "",
             "Settings: " + " · ".join(f"{k} = {fmt(v)}" for k, v in sorted(c.settings.items())), "",
             "## Leaderboard", "", *_leaderboard(c), "", COST_NOTE, "",
             f"{said}, Holm-corrected across the {len(c.pairs)} pairs (α = 0.05).", "", *_until_decided(c),
             *([f"**{c.common.method[0].upper()}{c.common.method[1:]}.**", ""] if c.common else []),
             *(["The counts are repeat 0's; the cost covers every repeat asked.", ""] if c.repeats else []),
             "## Pairwise tests", "", *_pairs(c), "", *_repeats(c)]
    reliable = [m for m in c.results if m.reliability]
    if reliable:
        lines += ["## Reliability: θ, r, g per model", "",
                  "θ: share of questions the model knows; r: right when it knows; g: right when it guesses "
                  "(ML fit over variant groups; the paper's moment solution alongside).", "",
                  *md_table(RELIABILITY_HEAD, [reliability_rows(m.label, m.reliability) for m in reliable]), ""]
    if c.correlation is not None:
        lines += _correlation(c)
    lines += _all_metrics(c)
    if figures:
        lines += ["## Plots", ""]
        for title, path in figures:
            lines += [f"### {title}", "", f"![{title}]({path.relative_to(out).as_posix()})", ""]
    if c.notes:
        lines += ["## Notes", "", *[f"- {note}" for note in c.notes], ""]
    lines += ["## Runs", "", *[f"- {m.label}: `{c.runs[m.label].path}`" for m in c.results], ""]
    return "\n".join(lines)


def write_comparison(c: Leaderboard, out: Path, plots: bool = True, plotter: Plotter | None = None) -> Path:
    """report.md and comparison.json in `out`, and (unless plots=False: --no-plots) plots/*.png, drawn by
    `plotter` where given (a child process: report/plot_process.py)."""
    out.mkdir(parents=True, exist_ok=True)
    figures = draw_all(out / "plots", c.results, plotter=plotter) if plots else []
    write_json_atomic(out / "comparison.json", c.to_dict())
    path = out / "report.md"
    path.write_text(render_comparison(c, figures, out), encoding="utf-8")
    return path



