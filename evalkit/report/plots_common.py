"""What every chart shares: sizes, wrapping, colours, grids, and the chance line.

matplotlib is imported inside the functions only, so importing this module stays light.

A chance line is dashed, in one colour no bar or heatmap uses (CHANCE_COLOR), and is recorded
in the saved PNG: `chance_pixels(fig)` gives, after drawing, where each one lies in the image's
pixels, which `plots` writes as the PNG text chunk CHANCE_KEY (JSON) so a reader can find it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

DPI = 100
MISSING_COLOR = "#d9d9d9"
CHANCE_COLOR = "#c51b7d"  # a magenta in no tab10/tab20, YlGnBu or OrRd colour
REFERENCE_COLOR = "#444444"
CHANCE_STYLES = ("--", "-.", (0, (1.5, 1.0)))  # one per distinct chance value
CHANCE_GID = "chance"
CHANCE_KEY = "evalkit chance lines"
CHAR_IN = 0.075  # rough width of one 10pt character, in inches
Num = float | int | None
Chance = tuple[float, str]  # (value on the axis, legend label)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, imported on first use (it costs ~0.9 s of CPU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def missing(v: Num) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def check_length(name: str, seq: Sequence[Any], n: int) -> None:
    if n == 0:
        raise ValueError(f"{name}: nothing to plot")
    if len(seq) != n:
        raise ValueError(f"{name}: expected {n} entries, got {len(seq)}")


def wrap(label: str, width: int = 26, split_words: bool = False) -> str:
    """Wrap at spaces (a long model id stays whole unless split_words); at most three lines."""
    text = str(label)
    return textwrap.fill(text, width, break_on_hyphens=False, break_long_words=split_words, max_lines=3,
                         placeholder=" …") or text


def chart_format(values: Sequence[Num]) -> str:
    """One format for a whole chart: three decimals for 0..1 scores, one for percentages."""
    return ".3f" if max((abs(float(v)) for v in values if not missing(v)), default=0.0) <= 1 else ".1f"


def text_in(labels: Sequence[str]) -> tuple[float, int]:
    """(longest line in inches, most lines) of already wrapped labels."""
    lines = [ln for lab in labels for ln in lab.split("\n")] or [""]
    return max(len(ln) for ln in lines) * CHAR_IN, max(lab.count("\n") + 1 for lab in labels or [""])


def figure(width: float, height: float, **kw: Any) -> tuple[Any, Any]:
    plt = pyplot()
    size = (min(max(width, 6.0), 60.0), min(max(height, 4.0), 60.0))
    return plt.subplots(figsize=size, dpi=DPI, layout="constrained", **kw)


def colors(n: int) -> list[Any]:
    cmap = pyplot().get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def grid(ax: Any, axis: str = "y") -> None:
    ax.grid(axis=axis, alpha=0.3)
    ax.set_axisbelow(True)


def xtick_labels(ax: Any, labels: Sequence[str]) -> float:
    """Set wrapped x tick labels, rotated when long; returns the inches they need below the axis."""
    wrapped = [wrap(lab) for lab in labels]
    width, lines = text_in(wrapped)
    ax.set_xticks(range(len(labels)))
    if len(labels) > 1 and width > 0.7:
        ax.set_xticklabels(wrapped, rotation=40, ha="right", rotation_mode="anchor", fontsize=9)
        return width * 0.65 + lines * 0.12 + 0.3
    ax.set_xticklabels(wrapped, fontsize=9)
    return lines * 0.17 + 0.3


def bar_span(lo: Num, hi: Num, v: float) -> tuple[float, float] | None:
    if missing(lo) or missing(hi):
        return None
    return max(v - float(lo), 0.0), max(float(hi) - v, 0.0)  # type: ignore[arg-type]


def chance_label(value: float, scale: float = 100.0) -> str:
    """"chance 25%" on percentage axes, "chance 0.0039" on 0-1 ones."""
    return f"chance {value:.3g}%" if scale == 100.0 else f"chance {value:.2g}"


def chance_lines(ax: Any, chance: Sequence[Chance], *, vertical: bool = False) -> list[Any]:
    """One dashed line per chance value (a different dash per value), above bars and whiskers."""
    out = []
    for i, (value, label) in enumerate(chance):
        draw = ax.axvline if vertical else ax.axhline
        line = draw(value, color=CHANCE_COLOR, ls=CHANCE_STYLES[i % len(CHANCE_STYLES)], lw=1.6, zorder=4,
                    label=label)
        line.set_gid(CHANCE_GID)
        out.append(line)
    return out


def group_chance_lines(ax: Any, values: Sequence[float | None], scale: float = 100.0) -> list[Any]:
    """A short dashed line over each group's bars at that group's own chance (None: no line there), a dash
    per distinct value; one legend handle per value."""
    order = sorted({v for v in values if v is not None})
    handles: dict[float, Any] = {}
    for g, value in enumerate(values):
        if value is None:
            continue
        (line,) = ax.plot([g - 0.45, g + 0.45], [value, value], color=CHANCE_COLOR, lw=1.6, zorder=4,
                          ls=CHANCE_STYLES[order.index(value) % len(CHANCE_STYLES)], label=chance_label(value, scale))
        line.set_gid(CHANCE_GID)
        handles.setdefault(value, line)
    return [handles[v] for v in order]


def reference_line(ax: Any, value: float, label: str) -> Any:
    """A solid line at the model's overall score (single-model charts)."""
    return ax.axhline(value, color=REFERENCE_COLOR, ls="-", lw=1.2, zorder=3.5, label=label)


def chance_pixels(fig: Any) -> list[dict[str, Any]]:
    """Where each chance line of a drawn figure lies in its image, in pixels from the top left:
    {"label", "orientation" ("h" or "v"), "at" (row or column), "span" [from, to] along it}."""
    height = fig.bbox.height
    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_gid() != CHANCE_GID:
                continue
            xs, ys = line.get_xdata(), line.get_ydata()
            (x0, y0), (x1, y1) = line.get_transform().transform([(xs[0], ys[0]), (xs[-1], ys[-1])])
            horizontal = abs(y1 - y0) < abs(x1 - x0)
            at = height - y0 if horizontal else x0
            span = sorted((x0, x1)) if horizontal else sorted((height - y0, height - y1))
            out.append({"label": line.get_label(), "orientation": "h" if horizontal else "v",
                        "at": round(float(at), 2), "span": [round(float(s), 2) for s in span]})
    return out


def matrix(ax: Any, rows: Sequence[Sequence[Num]], cmap_name: str, vmax: float,
           fmt_: str, missing_text: str = "—", annotate: bool = True) -> Any:
    """Draw a rows x columns grid of values on a sequential colormap; missing cells are grey."""
    import numpy as np

    cmap = pyplot().get_cmap(cmap_name).with_extremes(bad=MISSING_COLOR)
    data = np.ma.masked_invalid(np.array([[np.nan if missing(v) else float(v) for v in r] for r in rows]))
    im = ax.imshow(data, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    if annotate:
        size = 8 if data.shape[1] <= 20 else 6
        for (i, j), v in np.ndenumerate(data.filled(np.nan)):
            if math.isnan(v):
                ax.text(j, i, missing_text, ha="center", va="center", color="#666666", fontsize=size)
                continue
            r, g, b, _ = cmap(min(max(v / vmax, 0.0), 1.0) if vmax else 0.0)
            ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"
            ax.text(j, i, format(v, fmt_), ha="center", va="center", color=ink, fontsize=size)
    return im
