"""The set of plots for one or more analysed runs: each drawn only when the runs have its data.

Returns (title, path) pairs in the order report.md shows them; the single-run report and
`evalkit compare` both call it, with one model or many. Accuracy axes carry the runs' chance
(summary.json's chance_pct) as dashed lines, except where it blends question types of different
chances (chance_per_category: the category chart then draws each category's own, category_chart.py);
a run with no answer is drawn in no figure.

`plan_figures` says which figures there will be without drawing (report.md is written from it
before the plots). `draw_all` skips the drawing when plots/.inputs.sha256 holds the digest of
what the figures show (every result's `to_dict()`, the source of this module, plots.py,
plots_common.py and category_chart.py, the matplotlib version) and every file is there: a re-run whose records did not change redraws
nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from evalkit.metrics.analysis.result import ModelResult
from evalkit.metrics.analysis.views import Confusion
from evalkit.report import category_chart as category_chart_module
from evalkit.report import plots, plots_common
from evalkit.report.category_chart import category_chart
from evalkit.report.figure_memo import FigureMemo
from evalkit.report.plots_common import Chance

STAMP = ".inputs.sha256"


class Plotter(Protocol):
    """Draws the figures elsewhere (plot_process.PlotProcess); None from draw() means "draw them here"."""

    def draw(self, plot_dir: Path, results: Sequence[ModelResult]) -> list[tuple[str, Path]] | None: ...


@dataclass(frozen=True)
class PlannedFigure:
    title: str
    path: Path
    draw: Callable[[], Path]
    data: dict[str, Any] | None = None  # what it draws, where a plan says it (the category chart)


def _union(groups: Sequence[dict[str, object]]) -> list[str]:
    seen: dict[str, None] = {}
    for g in groups:
        seen.update(dict.fromkeys(g))
    return list(seen)


def _chances(results: Sequence[ModelResult], value: Callable[[ModelResult], float | None], scale: float = 100.0,
             factor: float = 1.0) -> list[Chance]:
    """One (value, label) per distinct chance value; labelled with its models when the models differ."""
    groups: dict[float, list[str]] = {}
    for m in results:
        v = value(m)
        if v is not None and not math.isnan(v):
            groups.setdefault(round(v * factor, 6), []).append(m.label)
    if len(groups) == 1:
        return [(v, plots_common.chance_label(v, scale)) for v in groups]
    return [(v, f"{plots_common.chance_label(v, scale)}: {', '.join(names)}") for v, names in sorted(groups.items())]


def unplotted(results: Sequence[ModelResult]) -> list[str]:
    """The runs the figures leave out, and why (a run with no answer has nothing to draw)."""
    return [f"{m.label}: no plots, nothing was answered" for m in results if not m.answered]


def plan_figures(plot_dir: Path, results: Sequence[ModelResult]) -> list[PlannedFigure]:
    """Every applicable figure with its path and a function drawing it; nothing is drawn here.

    Runs with no answer are left out (an empty or all-zero chart would read as a score); the
    figures' titles say which, and with none left there is no figure (see `unplotted`)."""
    plot_dir = Path(plot_dir)
    left_out = [m.label for m in results if not m.answered]
    results = [m for m in results if m.answered]
    models = [m.label for m in results]
    note = f" ({', '.join(left_out)}: nothing answered, not shown)" if left_out else ""
    out: list[PlannedFigure] = []

    def add(title: str, name: str, draw: Callable[[Path], Path], data: dict[str, Any] | None = None) -> None:
        path = plot_dir / name
        out.append(PlannedFigure(title + note, path, lambda: draw(path), data))

    # a run whose question types have different chances (chance_per_category) has no one chance line:
    # its chance_pct is a blend no question has (the category chart draws each category's own)
    chance = _chances(results, lambda m: m.chance if m.category_chance is None else None)
    many = len(results) > 1  # one run: no one-bar chart, no one-row heatmap (its category bars say it all)
    scored = [m for m in results if m.ci is not None]
    if scored and many:
        metric, scale = scored[0].metric or "score", scored[0].scale
        add(f"{metric} with 95% bootstrap intervals", "headline.png", lambda path: plots.headline_bars(
            path, f"{metric} (%)" if scale == 100.0 else metric, [m.label for m in scored], [m.ci.estimate for m in scored],  # type: ignore[union-attr]
            [m.ci.lo for m in scored], [m.ci.hi for m in scored], scale=scale,  # type: ignore[union-attr]
            chance=_chances(scored, lambda m: m.headline_chance, scale)))
    cats = _union([m.categories for m in results])
    if cats:
        values = [[m.categories[c].pct if c in m.categories else None for c in cats] for m in results]
        if many:
            add("Accuracy per category (models × skills)", "skills_heatmap.png",
                lambda path: plots.skill_heatmap(path, models, cats, values, chance=chance))
        chart = category_chart(results, cats, chance)
        panels = [asdict(p) for p in chart.panels]
        add(chart.title, "categories.png", lambda path: plots.category_bars(
            path, chart.models, panels, chance=chart.chance, reference=chart.reference, title=chart.heading),
            chart.to_dict())
    # a task (TDBench's grounding boxes) is not a variant of the answers: it has its own panel above
    variants = [v for v in _union([m.variants for m in results]) if not v.startswith("task=")]
    if variants:
        v_values = [[m.variants[v].pct if v in m.variants else None for v in variants] for m in results]
        add("Accuracy per variant (rotation, shift, language)", "variants.png",
            lambda path: plots.variant_accuracy(path, models, variants, v_values, chance=chance))
    confused = [m for m in results if m.confusion is not None and m.confusion.letters]
    if confused:
        letters = sorted({c for m in confused for c in m.confusion.letters})  # type: ignore[union-attr]
        add("Wrong choices: gold letter (rows) × chosen letter (columns)", "confusion.png",
            lambda path: plots.confusion_grid(path, [m.label for m in confused], letters,
                                              [_widen(m.confusion, letters) for m in confused],  # type: ignore[arg-type]
                                              other=[_widen_other(m.confusion, letters) for m in confused]))  # type: ignore[arg-type]
    with_e = [m for m in results if m.e_rate is not None]
    if with_e:
        add("Share of answers choosing option E", "e_rate.png", lambda path: plots.e_rate_bars(
            path, [m.label for m in with_e], [m.e_rate["answered"] for m in with_e],  # type: ignore[index]
            with_e[0].e_rate["gold"]))  # type: ignore[index]
    reliable = [m for m in results if m.reliability is not None]
    if reliable:
        sols = [_solution(m.reliability) for m in reliable]  # type: ignore[arg-type]
        add("Reliability decomposition: θ (knows), r (right when it knows), g (lucky guess)", "reliability.png",
            lambda path: plots.reliability_bars(path, [m.label for m in reliable],
                                                *[[s.get(k) for s in sols] for k in ("theta", "r", "g", "A_adj")],
                                                chance=_chances(reliable, lambda m: m.chance if m.category_chance is None
                                                                else None, 1.0, 0.01)))
    return out


def inputs_digest(results: Sequence[ModelResult]) -> str:
    """sha256 of everything the figures show and of the code and library that draw them."""
    h = hashlib.sha256()
    h.update(json.dumps([m.to_dict() for m in results], sort_keys=True, default=repr).encode())
    for module in (plots.__file__, plots_common.__file__, category_chart_module.__file__, __file__):
        h.update(Path(module).read_bytes())
    with contextlib.suppress(metadata.PackageNotFoundError):
        h.update(metadata.version("matplotlib").encode())
    return h.hexdigest()


def draw_all(plot_dir: Path, results: Sequence[ModelResult], *, skip_unchanged: bool = True,
             plotter: Plotter | None = None, memo: Path | None = None) -> list[tuple[str, Path]]:
    """Draw every applicable figure into plot_dir; (title, path) for each. With skip_unchanged, nothing
    is drawn when plot_dir's stamp matches these inputs and every figure's file exists. `plotter`: a
    child process that draws them (see plot_process); without one, or if it fails, they are drawn here.
    `memo`: a folder of figures drawn before (the cache folder's, report/figure_memo.py), by the digest
    of what they show: the same figures for another run directory are copied, not drawn."""
    plot_dir = Path(plot_dir)
    planned = plan_figures(plot_dir, results)
    stamp = plot_dir / STAMP
    digest = inputs_digest(results)
    if skip_unchanged and all(f.path.is_file() for f in planned):
        try:
            if stamp.read_text(encoding="ascii").strip() == digest:
                return [(f.title, f.path) for f in planned]
        except (OSError, ValueError):
            pass
    stamp.unlink(missing_ok=True)  # drawing may stop half way: no stamp then
    kept = FigureMemo(memo) if memo is not None and planned else None
    if kept is not None and kept.copy_out(digest, [f.path for f in planned]):
        stamp.write_text(digest + "\n", encoding="ascii")
        return [(f.title, f.path) for f in planned]
    out = plotter.draw(plot_dir, results) if plotter is not None and planned else None
    if out is None:
        out = [(f.title, f.draw()) for f in planned]
    if planned:
        stamp.write_text(digest + "\n", encoding="ascii")
        if kept is not None:
            kept.keep(digest, [f.path for f in planned])
    return out


def _widen(confusion: Confusion, letters: list[str]) -> list[list[int]]:
    """A model's matrix on the shared letter axis."""
    index = {c: i for i, c in enumerate(confusion.letters)}
    return [[confusion.wrong[index[g]][index[c]] if g in index and c in index else 0 for c in letters]
            for g in letters]


def _widen_other(confusion: Confusion, letters: list[str]) -> list[int]:
    """A model's "no option letter" counts per gold letter, on the shared letter axis."""
    index = {c: i for i, c in enumerate(confusion.letters)}
    return [confusion.other[index[g]] if g in index and confusion.other else 0 for g in letters]


def _solution(reliability: dict) -> dict:
    """The ML fit where it exists (always defined), else the paper's moment solution."""
    return reliability.get("ml") or reliability.get("paper") or {}
