"""PNG charts for evaluation reports, drawn from plain Python data (None marks a missing value).

matplotlib is imported inside the functions only, so importing this module stays light. Every
chart is at least 600x400 px (dpi 100) and grows with the number of models and categories.
Percentages are drawn on 0-100 axes; accuracy axes carry a dashed chance line per distinct
chance value (`chance`: (value, label) pairs), whose pixel position each PNG records (see
plots_common).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.report.plots_common import (
    CHANCE_KEY,
    DPI,
    Chance,
    Num,
    bar_span,
    chance_lines,
    chance_pixels,
    chart_format,
    check_length,
    colors,
    figure,
    grid,
    group_chance_lines,
    matrix,
    missing,
    pyplot,
    reference_line,
    text_in,
    wrap,
    xtick_labels,
)

__all__ = ["DPI", "pyplot", "headline_bars", "skill_heatmap", "dimension_bars", "category_bars", "confusion_grid",
           "e_rate_bars", "reliability_bars", "variant_accuracy"]
OTHER_COLUMN = "other /\nnone"


def _save(fig: Any, path: Path, title: str | None) -> Path:
    try:
        if title:
            fig.suptitle(title, fontsize=12)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta: dict[str, str | None] = {"Software": None}

        def note_chance(_event: Any) -> None:  # after layout and drawing, before the PNG is written
            lines = chance_pixels(fig)
            if lines:
                meta[CHANCE_KEY] = json.dumps(lines)

        fig.canvas.mpl_connect("draw_event", note_chance)
        with warnings.catch_warnings():  # labels in scripts the font lacks (CJK) draw as boxes, quietly
            warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
            fig.savefig(path, dpi=DPI, metadata=meta)
    finally:
        pyplot().close(fig)
    return path


def _grouped_bars(ax: Any, n_groups: int, names: Sequence[str], values: Sequence[Sequence[Num]],
                  lo: Sequence[Sequence[Num]] | None, hi: Sequence[Sequence[Num]] | None) -> list[Any]:
    """values[series][group] as grouped vertical bars; a missing value leaves a grey "—" at the base.

    Returns one legend patch per series (an all-missing series still gets its colour in the legend).
    """
    from matplotlib.patches import Patch

    palette, n = colors(len(names)), len(names)
    width = 0.8 / n
    for s in range(n):
        for label, seq in (("values", values), ("lo", lo), ("hi", hi)):
            if seq:
                check_length(f"{label}[{s}]", seq[s], n_groups)
        xs = [g - 0.4 + width * (s + 0.5) for g in range(n_groups)]
        ok = [g for g in range(n_groups) if not missing(values[s][g])]
        vs = {g: float(values[s][g]) for g in ok}  # type: ignore[arg-type]
        bars = ax.bar([xs[g] for g in ok], list(vs.values()), width * 0.92, color=palette[s])
        spans = {g: sp for g in ok if lo and hi and (sp := bar_span(lo[s][g], hi[s][g], vs[g])) is not None}
        if spans:
            err = [[sp[0] for sp in spans.values()], [sp[1] for sp in spans.values()]]
            ax.errorbar([xs[g] for g in spans], [vs[g] for g in spans], yerr=err, fmt="none",
                        ecolor="#333333", elinewidth=0.9, capsize=min(3.0, 18.0 / n))
        elif n * n_groups <= 40 and vs:
            ax.bar_label(bars, fmt="{:" + chart_format(list(vs.values())) + "}", fontsize=7, padding=1)
        for g in set(range(n_groups)) - set(ok):
            ax.text(xs[g], 0, "—", ha="center", va="bottom", color="#888888", fontsize=8)
    grid(ax)
    return [Patch(facecolor=palette[s], label=name) for s, name in enumerate(names)]


def _grouped_chart(path: Path, groups: Sequence[str], names: Sequence[str], values: Sequence[Sequence[Num]],
                   lo: Sequence[Sequence[Num]] | None, hi: Sequence[Sequence[Num]] | None, ylabel: str,
                   title: str | None, ylim: tuple[float, float], chance: Sequence[Chance] = (),
                   reference: Chance | None = None) -> Path:
    """Groups on the x axis, one bar per series within a group, legend of series outside on the right."""
    check_length("values", values, len(names))
    legend = [wrap(nm, 40) for nm in names]
    side = len(names) > 1  # a single series gets its legend on top, not a column of its own
    leg_w = text_in(legend + [c[1] for c in chance])[0] + 0.8 if side else 0.0
    lines = text_in([wrap(gr) for gr in groups])[1]
    width = 1.3 + leg_w + len(groups) * max(0.8, 0.12 * len(names) + 0.25, 0.26 * lines + 0.1)
    fig, ax = figure(width, 4.0)
    handles = _grouped_bars(ax, len(groups), legend, values, lo, hi)
    if reference is not None:
        handles.append(reference_line(ax, *reference))
    handles += chance_lines(ax, chance)
    below = xtick_labels(ax, groups)
    fig.set_figheight(min(max(4.0, 3.2 + below, 0.22 * len(handles) + 1.0, min(6.5, 0.25 * width)), 60.0))
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_ylim(*ylim)
    if side:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    else:
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, frameon=False,
                  borderaxespad=0.2, ncols=min(len(handles), 3))
    return _save(fig, path, title)


def headline_bars(path: Path, metric: str, models: list[str], values: list[float],
                  lo: list[float | None], hi: list[float | None], *, scale: float = 100.0,
                  chance: Sequence[Chance] = (), title: str | None = None) -> Path:
    """One horizontal bar per model (first on top) with 95% CI whiskers on a 0..scale axis; the
    headline-number chart. Chance lines are vertical here."""
    n = len(models)
    for name, seq in (("values", values), ("lo", lo), ("hi", hi)):
        check_length(name, seq, n)
    labels = [wrap(m, 40) for m in models]
    extra = 0.35 if chance else 0.0
    fig, ax = figure(4.5 + text_in(labels)[0], 1.2 + extra + 0.45 * n + 0.15 * sum(lb.count("\n") for lb in labels))
    ys = list(range(n))
    ok = [i for i in ys if not missing(values[i])]
    vals = {i: float(values[i]) for i in ok}
    ax.barh([ys[i] for i in ok], [vals[i] for i in ok], height=0.6, color=colors(1)[0])
    spans = {i: s for i in ok if (s := bar_span(lo[i], hi[i], vals[i])) is not None}
    if spans:
        err = [[spans[i][0] for i in spans], [spans[i][1] for i in spans]]
        ax.errorbar([vals[i] for i in spans], list(spans), xerr=err, fmt="none", ecolor="#333333", capsize=4)
    form = chart_format(values) if scale != 100.0 else ".1f"
    for i in ok:
        end = vals[i] + spans.get(i, (0.0, 0.0))[1]
        inside = end > 0.86 * scale  # no room on the right: the number goes inside the bar's end
        ax.annotate(format(vals[i], form), (vals[i] if inside else end, i), xytext=(-4 if inside else 4, 0),
                    textcoords="offset points", va="center", ha="right" if inside else "left", fontsize=9,
                    color="white" if inside else "black")
    for i in set(ys) - set(ok):
        ax.text(0, i, " —", va="center", color="#888888")
    ax.set_xlim(min([0.0, *vals.values()]), scale)
    ax.set_yticks(ys, labels, fontsize=9)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel(metric)
    handles = chance_lines(ax, chance, vertical=True)
    if handles:
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, frameon=False,
                  borderaxespad=0.2, ncols=min(len(handles), 3))
    grid(ax, "x")
    return _save(fig, path, title)


def skill_heatmap(path: Path, models: list[str], skills: list[str], values: list[list[float | None]], *,
                  vmax: float = 100.0, chance: Sequence[Chance] = (), title: str | None = None) -> Path:
    """Models (rows) x skills (columns) accuracy heatmap, as RGB-Th-Bench Figures 4-5; chance is
    marked on the colour bar."""
    check_length("values", values, len(models))
    rows = [wrap(m, 40) for m in models]
    cols = [wrap(s) for s in skills]
    col_w, col_lines = text_in(cols)
    width = 2.2 + text_in(rows)[0] + len(skills) * max(0.62, 0.26 * col_lines + 0.1)
    fig, ax = figure(width, 1.2 + 0.45 * len(models) + col_w * 0.7 + col_lines * 0.12)
    for i, r in enumerate(values):
        check_length(f"values[{i}]", r, len(skills))
    im = matrix(ax, values, "YlGnBu", vmax, ".1f", annotate=len(skills) <= 40)
    ax.set_yticks(range(len(models)), rows, fontsize=9)
    ax.set_xticks(range(len(skills)), cols, fontsize=9, rotation=40, ha="right", rotation_mode="anchor")
    ax.tick_params(length=0)
    bar = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02, aspect=max(10, 20 * min(1.0, len(models) / 6)))
    if chance:
        chance_lines(bar.ax, chance)
        bar.set_label(f"accuracy (%), dashed: chance {' / '.join(format(v, '.3g') + '%' for v, _ in chance)}",
                      fontsize=8)
    return _save(fig, path, title)


def dimension_bars(path: Path, models: list[str], dims: list[str], values: list[list[float | None]],
                   lo: list[list[float | None]], hi: list[list[float | None]], *,
                   ylabel: str = "accuracy (%)", chance: Sequence[Chance] = (), reference: Chance | None = None,
                   title: str | None = None) -> Path:
    """Per-dimension accuracy (%), one bar per model (values[model][dim]) with asymmetric 95% CI whiskers.
    `reference`: a solid line at the model's overall score (one model)."""
    check_length("lo", lo, len(models))
    check_length("hi", hi, len(models))
    return _grouped_chart(path, dims, models, values, lo, hi, ylabel, title, (0.0, 100.0), chance, reference)


def category_bars(path: Path, models: list[str], panels: Sequence[dict[str, Any]], *, chance: Sequence[Chance] = (),
                  reference: Chance | None = None, title: str | None = None) -> Path:
    """Per-category accuracy (%) with 95% whiskers, one bar per model, one panel per kind of answer:
    panels[0] the answers, the others (a task such as grounding boxes) on axes of their own. Each panel
    (category_chart.Panel as a dict) has `groups`, `values`, `lo`, `hi` ([model][group]), `ylabel`,
    `title` and `chance` (per group: a short dashed line over its bars, None for none); `chance` (lines
    across) and `reference` go on the first panel. One panel without per-group chance is dimension_bars."""
    if len(panels) == 1 and not any(v is not None for v in panels[0]["chance"]):
        p = panels[0]
        return dimension_bars(path, models, p["groups"], p["values"], p["lo"], p["hi"], ylabel=p["ylabel"],
                              chance=chance, reference=reference, title=title)
    legend = [wrap(nm, 40) for nm in models]
    side = len(models) > 1
    sizes = [len(p["groups"]) for p in panels]
    lines = max(text_in([wrap(g) for p in panels for g in p["groups"]])[1], 1)
    per_group = max(0.8, 0.12 * len(models) + 0.25, 0.26 * lines + 0.1)
    labels = legend + [c[1] for c in chance] + [f"chance {v:.3g}%" for p in panels for v in p["chance"] if v is not None]
    leg_w = text_in(labels)[0] + 0.8 if side else 0.0
    width = 1.3 + leg_w + sum(sizes) * per_group + 0.9 * (len(panels) - 1)
    fig, axes = figure(width, 4.0, ncols=len(panels), squeeze=False, width_ratios=[max(1, n) for n in sizes])
    handles: list[Any] = []
    below = 0.0
    for i, (ax, p) in enumerate(zip(axes[0], panels, strict=True)):
        check_length(f"panels[{i}].values", p["values"], len(models))
        patches = _grouped_bars(ax, len(p["groups"]), legend, p["values"], p["lo"], p["hi"])
        handles = handles or patches
        if i == 0 and reference is not None:
            handles.append(reference_line(ax, *reference))
        if i == 0:
            handles += chance_lines(ax, chance)
        handles += [h for h in group_chance_lines(ax, p["chance"]) if h.get_label() not in
                    {x.get_label() for x in handles}]
        below = max(below, xtick_labels(ax, p["groups"]))
        ax.set_xlim(-0.6, len(p["groups"]) - 0.4)
        ax.set_ylim(0.0, 100.0)
        ax.set_ylabel(p["ylabel"])
        if p.get("title"):
            ax.set_title(p["title"], fontsize=10)
    fig.set_figheight(min(max(4.0, 3.2 + below, 0.22 * len(handles) + 1.0, min(6.5, 0.25 * width)), 60.0))
    if side:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    else:
        axes[0][0].legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, frameon=False,
                          borderaxespad=0.2, ncols=min(len(handles), 3))
    return _save(fig, path, title)


def confusion_grid(path: Path, models: list[str], letters: list[str], matrices: list[list[list[int]]], *,
                   other: list[list[int]] | None = None, title: str | None = None) -> Path:
    """Wrong answers per (gold row, chosen column) letter, one panel per model: MME-RealWorld Figure 3.

    `other[model][gold]`: wrong answers choosing no option letter; one extra column when any is not 0."""
    from matplotlib.ticker import MaxNLocator

    n, k = len(models), len(letters)
    check_length("matrices", matrices, n)
    extra = other is not None and any(any(row) for row in other)
    if other is not None:
        check_length("other", other, n)
    cols = letters + ([OTHER_COLUMN] if extra else [])
    grids = [[[None if i == j else m[i][j] for j in range(k)] + ([other[idx][i]] if extra else [])  # type: ignore[index]
              for i in range(k)] for idx, m in enumerate(matrices)]
    vmax = float(max([v for g in grids for r in g for v in r if v is not None] + [1]))
    ncols, nrows = min(4, n), math.ceil(n / 4)
    panel = max(2.4, 0.42 * len(cols) + 1.0)
    fig, axes = figure(ncols * panel + 1.2, nrows * (panel + 0.4) + 0.5, nrows=nrows, ncols=ncols, squeeze=False)
    width_chars = int(panel / 0.065) - 2  # 9pt titles
    im = None
    for idx, ax in enumerate(axes.flat):
        if idx >= n:
            ax.set_axis_off()
            continue
        im = matrix(ax, grids[idx], "OrRd", vmax, ".0f", missing_text="", annotate=k <= 26)
        ax.set_title(wrap(models[idx], width_chars, split_words=True), fontsize=9)
        ax.set_xticks(range(len(cols)), cols, fontsize=8)
        ax.set_yticks(range(k), letters, fontsize=8)
        ax.tick_params(length=0)
        if extra:
            ax.axvline(k - 0.5, color="#333333", lw=1.0)
        ax.set_xlabel("chosen", fontsize=8)
        ax.set_ylabel("gold", fontsize=8)
    bar = fig.colorbar(im, ax=axes, fraction=0.04, pad=0.02, label="wrong answers")
    bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path, title)


def e_rate_bars(path: Path, models: list[str], answered: list[float], gold: float, *,
                title: str | None = None) -> Path:
    """% of answers choosing option E per model vs a dashed line at the gold share: MME-RealWorld Figure 4."""
    check_length("answered", answered, len(models))
    fig, ax = figure(1.5 + 0.75 * len(models), 4.0)
    ok = [i for i, v in enumerate(answered) if not missing(v)]
    bars = ax.bar(ok, [answered[i] for i in ok], width=0.6, color=colors(len(models)))
    ax.bar_label(bars, fmt="%.1f", fontsize=8, padding=2)
    for i in set(range(len(models))) - set(ok):
        ax.text(i, 0, "—", ha="center", va="bottom", color="#888888")
    ax.axhline(gold, ls="--", color="#333333", lw=1.2, label=f"gold share of E ({gold:.1f}%)")
    below = xtick_labels(ax, models)
    fig.set_figheight(max(4.0, 3.2 + below))
    ax.set_xlim(-0.6, len(models) - 0.4)
    ax.set_ylim(0.0, 100.0)
    ax.set_ylabel("answers choosing E (%)")
    ax.legend(loc="upper right", fontsize=8)
    grid(ax)
    return _save(fig, path, title)


def reliability_bars(path: Path, models: list[str], theta: list[float | None], r: list[float | None],
                     g: list[float | None], a_adj: list[float | None], *, chance: Sequence[Chance] = (),
                     title: str | None = None) -> Path:
    """θ, r, g and adjusted accuracy θ·r per model on a 0..1 axis: TDBench Figure 1 (right). `chance`
    (as a fraction) is what g, the accuracy of guessing, would be for a blind guess."""
    names = ["θ (share known)", "r (acc. when known)", "g (acc. when guessing)", "A_adj = θ·r"]
    return _grouped_chart(path, models, names, [theta, r, g, a_adj], None, None, "value (0–1)", title,
                          (0.0, 1.05), chance)


def variant_accuracy(path: Path, models: list[str], variants: list[str], values: list[list[float | None]], *,
                     ylabel: str = "accuracy (%)", chance: Sequence[Chance] = (), title: str | None = None) -> Path:
    """Accuracy (%) per input variant (rotation, shift, language...) per model, values[model][variant]."""
    return _grouped_chart(path, variants, models, values, None, None, ylabel, title, (0.0, 100.0), chance)
