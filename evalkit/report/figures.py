"""The set of plots for one or more analysed runs: each drawn only when the runs have its data.

Returns (title, path) pairs in the order report.md shows them; the single-run report and
`evalkit compare` both call it, with one model or many.

`plan_figures` says which figures there will be without drawing (report.md is written from it
before the plots). `draw_all` skips the drawing when plots/.inputs.sha256 holds the digest of
what the figures show (every result's `to_dict()`, this module's and plots.py's source, the
matplotlib version) and every file is there: a re-run whose records did not change redraws
nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Protocol

from evalkit.analysis.result import ModelResult
from evalkit.report import plots

STAMP = ".inputs.sha256"


class Plotter(Protocol):
    """Draws the figures elsewhere (plot_process.PlotProcess); None from draw() means "draw them here"."""

    def draw(self, plot_dir: Path, results: Sequence[ModelResult]) -> list[tuple[str, Path]] | None: ...


@dataclass(frozen=True)
class PlannedFigure:
    title: str
    path: Path
    draw: Callable[[], Path]


def _union(groups: Sequence[dict[str, object]]) -> list[str]:
    seen: dict[str, None] = {}
    for g in groups:
        seen.update(dict.fromkeys(g))
    return list(seen)


def plan_figures(plot_dir: Path, results: Sequence[ModelResult]) -> list[PlannedFigure]:
    """Every applicable figure with its path and a function drawing it; nothing is drawn here."""
    plot_dir = Path(plot_dir)
    models = [m.label for m in results]
    out: list[PlannedFigure] = []

    def add(title: str, name: str, draw: Callable[[Path], Path]) -> None:
        path = plot_dir / name
        out.append(PlannedFigure(title, path, lambda: draw(path)))

    many = len(results) > 1  # one run: no one-bar chart, no one-row heatmap (its category bars say it all)
    scored = [m for m in results if m.ci is not None]
    if scored and many:
        metric = scored[0].metric or "score"
        add(f"{metric} with 95% bootstrap intervals", "headline.png", lambda path: plots.headline_bars(
            path, metric, [m.label for m in scored], [m.ci.estimate for m in scored],  # type: ignore[union-attr]
            [m.ci.lo for m in scored], [m.ci.hi for m in scored]))  # type: ignore[union-attr]
    cats = _union([m.categories for m in results])
    if cats:
        values = [[m.categories[c].pct if c in m.categories else None for c in cats] for m in results]
        if many:
            add("Accuracy per category (models × skills)", "skills_heatmap.png",
                lambda path: plots.skill_heatmap(path, models, cats, values))
        lo = [[m.categories[c].ci[0] if c in m.categories else None for c in cats] for m in results]
        hi = [[m.categories[c].ci[1] if c in m.categories else None for c in cats] for m in results]
        add("Accuracy per category with 95% Wilson intervals", "categories.png",
            lambda path: plots.dimension_bars(path, models, cats, values, lo, hi))
    variants = _union([m.variants for m in results])
    if variants:
        v_values = [[m.variants[v].pct if v in m.variants else None for v in variants] for m in results]
        add("Accuracy per variant (rotation, shift, language)", "variants.png",
            lambda path: plots.variant_accuracy(path, models, variants, v_values))
    confused = [m for m in results if m.confusion is not None]
    if confused:
        letters = sorted({c for m in confused for c in m.confusion[0]})  # type: ignore[index]
        add("Wrong choices: gold letter (rows) × chosen letter (columns)", "confusion.png",
            lambda path: plots.confusion_grid(path, [m.label for m in confused], letters,
                                              [_widen(m.confusion, letters) for m in confused]))  # type: ignore[arg-type]
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
                                                *[[s.get(k) for s in sols] for k in ("theta", "r", "g", "A_adj")]))
    return out


def inputs_digest(results: Sequence[ModelResult]) -> str:
    """sha256 of everything the figures show and of the code and library that draw them."""
    h = hashlib.sha256()
    h.update(json.dumps([m.to_dict() for m in results], sort_keys=True, default=repr).encode())
    for module in (plots.__file__, __file__):
        h.update(Path(module).read_bytes())
    with contextlib.suppress(metadata.PackageNotFoundError):
        h.update(metadata.version("matplotlib").encode())
    return h.hexdigest()


def draw_all(plot_dir: Path, results: Sequence[ModelResult], *, skip_unchanged: bool = True,
             plotter: Plotter | None = None) -> list[tuple[str, Path]]:
    """Draw every applicable figure into plot_dir; (title, path) for each. With skip_unchanged, nothing
    is drawn when plot_dir's stamp matches these inputs and every figure's file exists. `plotter`: a
    child process that draws them (see plot_process); without one, or if it fails, they are drawn here."""
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
    out = plotter.draw(plot_dir, results) if plotter is not None and planned else None
    if out is None:
        out = [(f.title, f.draw()) for f in planned]
    if planned:
        stamp.write_text(digest + "\n", encoding="ascii")
    return out


def _widen(confusion: tuple[list[str], list[list[int]]], letters: list[str]) -> list[list[int]]:
    """A model's matrix on the shared letter axis."""
    own, matrix = confusion
    index = {c: i for i, c in enumerate(own)}
    return [[matrix[index[g]][index[c]] if g in index and c in index else 0 for c in letters] for g in letters]


def _solution(reliability: dict) -> dict:
    """The ML fit where it exists (always defined), else the paper's moment solution."""
    return reliability.get("ml") or reliability.get("paper") or {}
