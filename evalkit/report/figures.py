"""The set of plots for one or more analysed runs: each drawn only when the runs have its data.

Returns (title, path) pairs in the order report.md shows them; the single-run report and
`evalkit compare` both call it, with one model or many.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evalkit.analysis.result import ModelResult
from evalkit.report import plots


def _union(groups: Sequence[dict[str, object]]) -> list[str]:
    seen: dict[str, None] = {}
    for g in groups:
        seen.update(dict.fromkeys(g))
    return list(seen)


def draw_all(plot_dir: Path, results: Sequence[ModelResult]) -> list[tuple[str, Path]]:
    """Draw every applicable figure into plot_dir; (title, path) for each."""
    plot_dir = Path(plot_dir)
    models = [m.label for m in results]
    out: list[tuple[str, Path]] = []
    scored = [m for m in results if m.ci is not None]
    if scored:
        metric = scored[0].metric or "score"
        out.append((f"{metric} with 95% bootstrap intervals", plots.headline_bars(
            plot_dir / "headline.png", metric, [m.label for m in scored], [m.ci.estimate for m in scored],
            [m.ci.lo for m in scored], [m.ci.hi for m in scored])))
    cats = _union([m.categories for m in results])
    if cats:
        values = [[m.categories[c].pct if c in m.categories else None for c in cats] for m in results]
        out.append(("Accuracy per category (models × skills)",
                    plots.skill_heatmap(plot_dir / "skills_heatmap.png", models, cats, values)))
        lo = [[m.categories[c].ci[0] if c in m.categories else None for c in cats] for m in results]
        hi = [[m.categories[c].ci[1] if c in m.categories else None for c in cats] for m in results]
        out.append(("Accuracy per category with 95% Wilson intervals",
                    plots.dimension_bars(plot_dir / "categories.png", models, cats, values, lo, hi)))
    variants = _union([m.variants for m in results])
    if variants:
        values = [[m.variants[v].pct if v in m.variants else None for v in variants] for m in results]
        out.append(("Accuracy per variant (rotation, shift, language)",
                    plots.variant_accuracy(plot_dir / "variants.png", models, variants, values)))
    confused = [m for m in results if m.confusion is not None]
    if confused:
        letters = sorted({c for m in confused for c in m.confusion[0]})  # type: ignore[index]
        out.append(("Wrong choices: gold letter (rows) × chosen letter (columns)", plots.confusion_grid(
            plot_dir / "confusion.png", [m.label for m in confused], letters,
            [_widen(m.confusion, letters) for m in confused])))  # type: ignore[arg-type]
    with_e = [m for m in results if m.e_rate is not None]
    if with_e:
        out.append(("Share of answers choosing option E", plots.e_rate_bars(
            plot_dir / "e_rate.png", [m.label for m in with_e], [m.e_rate["answered"] for m in with_e],
            with_e[0].e_rate["gold"])))  # type: ignore[index]
    reliable = [m for m in results if m.reliability is not None]
    if reliable:
        sols = [_solution(m.reliability) for m in reliable]
        out.append(("Reliability decomposition: θ (knows), r (right when it knows), g (lucky guess)",
                    plots.reliability_bars(plot_dir / "reliability.png", [m.label for m in reliable],
                                           *[[s.get(k) for s in sols] for k in ("theta", "r", "g", "A_adj")])))
    return out


def _widen(confusion: tuple[list[str], list[list[int]]], letters: list[str]) -> list[list[int]]:
    """A model's matrix on the shared letter axis."""
    own, matrix = confusion
    index = {c: i for i, c in enumerate(own)}
    return [[matrix[index[g]][index[c]] if g in index and c in index else 0 for c in letters] for g in letters]


def _solution(reliability: dict) -> dict:
    """The ML fit where it exists (always defined), else the paper's moment solution."""
    return reliability.get("ml") or reliability.get("paper") or {}
