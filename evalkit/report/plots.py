"""PNG charts for evaluation reports, drawn from plain Python data (None marks a missing value).

matplotlib is imported inside the functions only, so importing this module stays light. Every
chart is at least 600x400 px (dpi 100) and grows with the number of models and categories.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DPI = 100
MISSING_COLOR = "#d9d9d9"
CHAR_IN = 0.075  # rough width of one 10pt character, in inches
Num = float | int | None


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, imported on first use (it costs ~0.9 s of CPU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _missing(v: Num) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _check(name: str, seq: Sequence[Any], n: int) -> None:
    if n == 0:
        raise ValueError(f"{name}: nothing to plot")
    if len(seq) != n:
        raise ValueError(f"{name}: expected {n} entries, got {len(seq)}")


def _wrap(label: str, width: int = 26, split_words: bool = False) -> str:
    """Wrap at spaces (a long model id stays whole unless split_words); at most three lines."""
    text = str(label)
    return textwrap.fill(text, width, break_on_hyphens=False, break_long_words=split_words, max_lines=3,
                         placeholder=" …") or text


def _fmt(values: Sequence[Num]) -> str:
    """One format for a whole chart: three decimals for 0..1 scores, one for percentages."""
    return ".3f" if max((abs(float(v)) for v in values if not _missing(v)), default=0.0) <= 1 else ".1f"


def _text_in(labels: Sequence[str]) -> tuple[float, int]:
    """(longest line in inches, most lines) of already wrapped labels."""
    lines = [ln for lab in labels for ln in lab.split("\n")] or [""]
    return max(len(ln) for ln in lines) * CHAR_IN, max(lab.count("\n") + 1 for lab in labels or [""])


def _figure(width: float, height: float, **kw: Any) -> tuple[Any, Any]:
    plt = pyplot()
    size = (min(max(width, 6.0), 60.0), min(max(height, 4.0), 60.0))
    return plt.subplots(figsize=size, layout="constrained", **kw)


def _save(fig: Any, path: Path, title: str | None) -> Path:
    try:
        if title:
            fig.suptitle(title, fontsize=12)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():  # labels in scripts the font lacks (CJK) draw as boxes, quietly
            warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
            fig.savefig(path, dpi=DPI, metadata={"Software": None})
    finally:
        pyplot().close(fig)
    return path


def _colors(n: int) -> list[Any]:
    cmap = pyplot().get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def _grid(ax: Any, axis: str = "y") -> None:
    ax.grid(axis=axis, alpha=0.3)
    ax.set_axisbelow(True)


def _xtick_labels(ax: Any, labels: Sequence[str]) -> float:
    """Set wrapped x tick labels, rotated when long; returns the inches they need below the axis."""
    wrapped = [_wrap(lab) for lab in labels]
    width, lines = _text_in(wrapped)
    ax.set_xticks(range(len(labels)))
    if len(labels) > 1 and width > 0.7:
        ax.set_xticklabels(wrapped, rotation=40, ha="right", rotation_mode="anchor", fontsize=9)
        return width * 0.65 + lines * 0.12 + 0.3
    ax.set_xticklabels(wrapped, fontsize=9)
    return lines * 0.17 + 0.3


def _bar_span(lo: Num, hi: Num, v: float) -> tuple[float, float] | None:
    if _missing(lo) or _missing(hi):
        return None
    return max(v - float(lo), 0.0), max(float(hi) - v, 0.0)  # type: ignore[arg-type]


def _grouped_bars(ax: Any, n_groups: int, names: Sequence[str], values: Sequence[Sequence[Num]],
                  lo: Sequence[Sequence[Num]] | None, hi: Sequence[Sequence[Num]] | None) -> list[Any]:
    """values[series][group] as grouped vertical bars; a missing value leaves a grey "—" at the base.

    Returns one legend patch per series (an all-missing series still gets its colour in the legend).
    """
    from matplotlib.patches import Patch

    colors, n = _colors(len(names)), len(names)
    width = 0.8 / n
    for s in range(n):
        for label, seq in (("values", values), ("lo", lo), ("hi", hi)):
            if seq:
                _check(f"{label}[{s}]", seq[s], n_groups)
        xs = [g - 0.4 + width * (s + 0.5) for g in range(n_groups)]
        ok = [g for g in range(n_groups) if not _missing(values[s][g])]
        vs = {g: float(values[s][g]) for g in ok}  # type: ignore[arg-type]
        bars = ax.bar([xs[g] for g in ok], list(vs.values()), width * 0.92, color=colors[s])
        spans = {g: sp for g in ok if lo and hi and (sp := _bar_span(lo[s][g], hi[s][g], vs[g])) is not None}
        if spans:
            err = [[sp[0] for sp in spans.values()], [sp[1] for sp in spans.values()]]
            ax.errorbar([xs[g] for g in spans], [vs[g] for g in spans], yerr=err, fmt="none",
                        ecolor="#333333", elinewidth=0.9, capsize=min(3.0, 18.0 / n))
        elif n * n_groups <= 40 and vs:
            ax.bar_label(bars, fmt="{:" + _fmt(list(vs.values())) + "}", fontsize=7, padding=1)
        for g in set(range(n_groups)) - set(ok):
            ax.text(xs[g], 0, "—", ha="center", va="bottom", color="#888888", fontsize=8)
    _grid(ax)
    return [Patch(facecolor=colors[s], label=name) for s, name in enumerate(names)]


def _grouped_chart(path: Path, groups: Sequence[str], names: Sequence[str], values: Sequence[Sequence[Num]],
                   lo: Sequence[Sequence[Num]] | None, hi: Sequence[Sequence[Num]] | None, ylabel: str,
                   title: str | None, ylim: tuple[float, float] | None = None) -> Path:
    """Groups on the x axis, one bar per series within a group, legend of series outside on the right."""
    _check("values", values, len(names))
    legend = [_wrap(nm, 40) for nm in names]
    side = len(names) > 1  # a single series gets its legend on top, not a column of its own
    leg_w = _text_in(legend)[0] + 0.8 if side else 0.0
    lines = _text_in([_wrap(gr) for gr in groups])[1]
    width = 1.3 + leg_w + len(groups) * max(0.8, 0.12 * len(names) + 0.25, 0.26 * lines + 0.1)
    fig, ax = _figure(width, 4.0)
    handles = _grouped_bars(ax, len(groups), legend, values, lo, hi)
    below = _xtick_labels(ax, groups)
    fig.set_figheight(min(max(4.0, 3.2 + below, 0.22 * len(names) + 1.0, min(6.5, 0.25 * width)), 60.0))
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    if side:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    else:
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=8, frameon=False,
                  borderaxespad=0.2)
    return _save(fig, path, title)


def _matrix(ax: Any, rows: Sequence[Sequence[Num]], cmap_name: str, vmax: float,
            fmt: str, missing: str = "—", annotate: bool = True) -> Any:
    """Draw a rows x columns grid of values on a sequential colormap; missing cells are grey."""
    import numpy as np

    cmap = pyplot().get_cmap(cmap_name).with_extremes(bad=MISSING_COLOR)
    data = np.ma.masked_invalid(np.array([[np.nan if _missing(v) else float(v) for v in r] for r in rows]))
    im = ax.imshow(data, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    if annotate:
        size = 8 if data.shape[1] <= 20 else 6
        for (i, j), v in np.ndenumerate(data.filled(np.nan)):
            if math.isnan(v):
                ax.text(j, i, missing, ha="center", va="center", color="#666666", fontsize=size)
                continue
            r, g, b, _ = cmap(min(max(v / vmax, 0.0), 1.0) if vmax else 0.0)
            ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"
            ax.text(j, i, format(v, fmt), ha="center", va="center", color=ink, fontsize=size)
    return im


def headline_bars(path: Path, metric: str, models: list[str], values: list[float],
                  lo: list[float | None], hi: list[float | None], *, title: str | None = None) -> Path:
    """One horizontal bar per model (first on top) with 95% CI whiskers; the headline-number chart."""
    n = len(models)
    for name, seq in (("values", values), ("lo", lo), ("hi", hi)):
        _check(name, seq, n)
    labels = [_wrap(m, 40) for m in models]
    fig, ax = _figure(4.5 + _text_in(labels)[0], 1.2 + 0.45 * n + 0.15 * sum(lb.count("\n") for lb in labels))
    ys = list(range(n))
    ok = [i for i in ys if not _missing(values[i])]
    vals = {i: float(values[i]) for i in ok}
    ax.barh([ys[i] for i in ok], [vals[i] for i in ok], height=0.6, color=_colors(1)[0])
    spans = {i: s for i in ok if (s := _bar_span(lo[i], hi[i], vals[i])) is not None}
    if spans:
        err = [[spans[i][0] for i in spans], [spans[i][1] for i in spans]]
        ax.errorbar([vals[i] for i in spans], list(spans), xerr=err, fmt="none", ecolor="#333333", capsize=4)
    ends = [vals[i] + spans.get(i, (0.0, 0.0))[1] for i in ok]
    fmt = _fmt(values)
    for i, end in zip(ok, ends, strict=True):
        ax.annotate(format(vals[i], fmt), (end, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=9)
    for i in set(ys) - set(ok):
        ax.text(0, i, " —", va="center", color="#888888")
    top = max(ends + [0.0]) or 1.0
    ax.set_xlim(min(0.0, *vals.values()) if vals else 0.0, top * 1.18)
    ax.set_yticks(ys, labels, fontsize=9)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel(metric)
    _grid(ax, "x")
    return _save(fig, path, title)


def skill_heatmap(path: Path, models: list[str], skills: list[str], values: list[list[float | None]], *,
                  vmax: float = 100.0, title: str | None = None) -> Path:
    """Models (rows) x skills (columns) accuracy heatmap, as RGB-Th-Bench Figures 4-5."""
    _check("values", values, len(models))
    rows = [_wrap(m, 40) for m in models]
    cols = [_wrap(s) for s in skills]
    col_w, col_lines = _text_in(cols)
    width = 2.2 + _text_in(rows)[0] + len(skills) * max(0.62, 0.26 * col_lines + 0.1)
    fig, ax = _figure(width, 1.2 + 0.45 * len(models) + col_w * 0.7 + col_lines * 0.12)
    for i, r in enumerate(values):
        _check(f"values[{i}]", r, len(skills))
    im = _matrix(ax, values, "YlGnBu", vmax, ".1f", annotate=len(skills) <= 40)
    ax.set_yticks(range(len(models)), rows, fontsize=9)
    ax.set_xticks(range(len(skills)), cols, fontsize=9, rotation=40, ha="right", rotation_mode="anchor")
    ax.tick_params(length=0)
    fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02, aspect=max(10, 20 * min(1.0, len(models) / 6)))
    return _save(fig, path, title)


def dimension_bars(path: Path, models: list[str], dims: list[str], values: list[list[float | None]],
                   lo: list[list[float | None]], hi: list[list[float | None]], *,
                   ylabel: str = "accuracy (%)", title: str | None = None) -> Path:
    """Per-dimension accuracy, one bar per model (values[model][dim]) with asymmetric 95% CI whiskers."""
    _check("lo", lo, len(models))
    _check("hi", hi, len(models))
    return _grouped_chart(path, dims, models, values, lo, hi, ylabel, title)


def confusion_grid(path: Path, models: list[str], letters: list[str], matrices: list[list[list[int]]], *,
                   title: str | None = None) -> Path:
    """Wrong answers per (gold row, chosen column) letter, one panel per model: MME-RealWorld Figure 3."""
    from matplotlib.ticker import MaxNLocator

    n, k = len(models), len(letters)
    _check("matrices", matrices, n)
    grids = [[[None if i == j else m[i][j] for j in range(k)] for i in range(k)] for m in matrices]
    vmax = float(max([v for g in grids for r in g for v in r if v is not None] + [1]))
    ncols, nrows = min(4, n), math.ceil(n / 4)
    panel = max(2.4, 0.42 * k + 1.0)
    fig, axes = _figure(ncols * panel + 1.2, nrows * (panel + 0.4) + 0.5, nrows=nrows, ncols=ncols,
                        squeeze=False)
    width_chars = int(panel / 0.065) - 2  # 9pt titles
    im = None
    for idx, ax in enumerate(axes.flat):
        if idx >= n:
            ax.set_axis_off()
            continue
        im = _matrix(ax, grids[idx], "OrRd", vmax, ".0f", missing="", annotate=k <= 26)
        ax.set_title(_wrap(models[idx], width_chars, split_words=True), fontsize=9)
        ax.set_xticks(range(k), letters, fontsize=8)
        ax.set_yticks(range(k), letters, fontsize=8)
        ax.tick_params(length=0)
        ax.set_xlabel("chosen", fontsize=8)
        ax.set_ylabel("gold", fontsize=8)
    bar = fig.colorbar(im, ax=axes, fraction=0.04, pad=0.02, label="wrong answers")
    bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path, title)


def e_rate_bars(path: Path, models: list[str], answered: list[float], gold: float, *,
                title: str | None = None) -> Path:
    """% of answers choosing option E per model vs a dashed line at the gold share: MME-RealWorld Figure 4."""
    _check("answered", answered, len(models))
    fig, ax = _figure(1.5 + 0.75 * len(models), 4.0)
    ok = [i for i, v in enumerate(answered) if not _missing(v)]
    bars = ax.bar(ok, [answered[i] for i in ok], width=0.6, color=_colors(len(models)))
    ax.bar_label(bars, fmt="%.1f", fontsize=8, padding=2)
    for i in set(range(len(models))) - set(ok):
        ax.text(i, 0, "—", ha="center", va="bottom", color="#888888")
    ax.axhline(gold, ls="--", color="#333333", lw=1.2, label=f"gold share of E ({gold:.1f}%)")
    below = _xtick_labels(ax, models)
    fig.set_figheight(max(4.0, 3.2 + below))
    ax.set_xlim(-0.6, len(models) - 0.4)
    ax.set_ylim(0, max([gold] + [answered[i] for i in ok]) * 1.25 or 5.0)
    ax.set_ylabel("answers choosing E (%)")
    ax.legend(loc="best", fontsize=8)
    _grid(ax)
    return _save(fig, path, title)


def reliability_bars(path: Path, models: list[str], theta: list[float | None], r: list[float | None],
                     g: list[float | None], a_adj: list[float | None], *, title: str | None = None) -> Path:
    """θ, r, g and adjusted accuracy θ·r per model on a 0..1 axis: TDBench Figure 1 (right)."""
    names = ["θ (share known)", "r (acc. when known)", "g (acc. when guessing)", "A_adj = θ·r"]
    return _grouped_chart(path, models, names, [theta, r, g, a_adj], None, None, "value (0–1)", title,
                          ylim=(0.0, 1.05))


def variant_accuracy(path: Path, models: list[str], variants: list[str], values: list[list[float | None]], *,
                     ylabel: str = "accuracy (%)", title: str | None = None) -> Path:
    """Accuracy per input variant (rotation, shift, language...) per model, values[model][variant]."""
    return _grouped_chart(path, variants, models, values, None, None, ylabel, title)
