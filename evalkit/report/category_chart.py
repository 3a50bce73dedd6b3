"""The accuracy-per-category figure as data: which categories sit on which axis, what the titles say and
which chance each bar is measured against. Pure; `figures` draws it with `plots.category_bars`.

- Categories answered as a task of their own (records with a `task` variant: TDBench's grounding boxes)
  get a panel and an axis of their own, not the answers' accuracy axis.
- Chance is drawn where it means something: one line across the axis when every category has the same
  chance (as always); where question types differ (summary.json's chance_per_category) a short line over
  each category's bars at its own chance (50% over two options or yes/no, 25% over four), and none over
  a category whose questions mix types or have free answers — never the blend of them all.
- One run's title says the bars' own number, the accuracy over its answers; a headline of another kind
  (TDBench's RE: a fraction of items right at every rotation) is named apart, not as the bars' title.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evalkit.metrics.analysis.result import ModelResult
from evalkit.report.plots_common import Chance, chance_label

TITLE = "Accuracy per category with 95% intervals (an item's variants count as one item)"
ACCURACY = "accuracy (%)"


@dataclass(frozen=True)
class Panel:
    """One axis of the figure: its categories, values[model][category] (%) with 95% bounds, and the
    chance line over each category's bars (None: none there)."""

    title: str | None  # None: the answers' panel
    ylabel: str
    groups: list[str]
    values: list[list[float | None]]
    lo: list[list[float | None]]
    hi: list[list[float | None]]
    chance: list[float | None]


@dataclass(frozen=True)
class CategoryChart:
    title: str  # report.md's heading of the figure
    heading: str | None  # the figure's own title (one run)
    models: list[str]
    panels: list[Panel]  # the answers' accuracy first, then one per task
    chance: list[Chance]  # lines across the answers' axis (when its categories share one chance)
    reference: Chance | None  # one run: a solid line at its overall score on the answers' axis

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tasks_of(results: Sequence[ModelResult]) -> dict[str, str]:
    """category -> task, for categories every record of which carries a `task` variant (grounding)."""
    seen: dict[str, set[str]] = {}
    for m in results:
        for r in m.records:
            if r.category:
                seen.setdefault(r.category, set()).add(str(r.variant.get("task") or ""))
    return {cat: next(iter(kinds)) for cat, kinds in seen.items() if len(kinds) == 1 and "" not in kinds}


def group_chance(results: Sequence[ModelResult], groups: Sequence[str]) -> list[float | None] | None:
    """Each category's chance where the runs give one per category and agree on it; None: no run does."""
    given = [m.category_chance for m in results if m.category_chance is not None]
    if not given:
        return None
    out: list[float | None] = []
    for g in groups:
        values = {c.get(g) for c in given}
        out.append(values.pop() if len(values) == 1 else None)
    return out


def category_chart(results: Sequence[ModelResult], cats: Sequence[str], chance: list[Chance]) -> CategoryChart:
    """The figure for `cats` (every category of the runs), with `chance` the runs' whole-axis lines."""
    tasks = tasks_of(results)
    main = [c for c in cats if c not in tasks]
    panels, lines = [], chance
    if main:
        per_group = group_chance(results, main)
        if per_group is not None:  # question types differ: no blended line
            agreed = set(per_group)
            lines = [(v, chance_label(v)) for v in agreed if v is not None] if len(agreed) == 1 else []
            per_group = None if lines else per_group  # the axis's categories share one after all: a line across
        panels.append(_panel(results, main, None, ACCURACY, per_group))
    for task in dict.fromkeys(tasks[c] for c in cats if c in tasks):
        groups = [c for c in cats if tasks.get(c) == task]
        panels.append(_panel(results, groups, task, f"{task}: right (%)", group_chance(results, groups)))
    models = [m.label for m in results]
    scored = [m for m in results if m.ci is not None]
    if len(results) == 1 and scored:
        title, heading, reference = _single(scored[0], set(main))
        return CategoryChart(title, heading, models, panels, lines if main else [], reference if main else None)
    return CategoryChart(TITLE, None, models, panels, lines if main else [], None)


def _panel(results: Sequence[ModelResult], groups: list[str], title: str | None, ylabel: str,
           chance: list[float | None] | None) -> Panel:
    def cells(get: Any) -> list[list[float | None]]:
        return [[get(m.categories[c]) if c in m.categories else None for c in groups] for m in results]

    return Panel(title, ylabel, groups, cells(lambda r: r.pct), cells(lambda r: r.ci[0]), cells(lambda r: r.ci[1]),
                 chance if chance is not None else [None] * len(groups))


def _single(m: ModelResult, answers: set[str]) -> tuple[str, str, Chance | None]:
    """(report title, figure title, reference line) of one run. A headline that is a share of answers
    sits on the bars' axis: it is the title and a solid line. Another (a fraction, or a share of items
    right at every variant) is named apart, and the line and the title give the accuracy over the
    answers on the axis instead."""
    ci = m.ci
    assert ci is not None
    form = ".1f" if m.scale == 100.0 else ".3f"
    unit = "%" if m.scale == 100.0 else ""
    said = f"{m.metric} {ci.estimate:{form}}{unit} (95% CI {ci.lo:{form}}–{ci.hi:{form}})"
    if m.per_answer_headline:
        return f"{TITLE}; overall {said}", f"{m.label}: {said}", (ci.estimate, f"{m.metric} {ci.estimate:.1f}% overall")
    on_axis = [r for r in m.records if r.category in answers]
    if not on_axis:
        return f"{TITLE}; headline {said}", f"{m.label}: accuracy per category (%)", None
    pooled = 100.0 * sum(r.correct is True for r in on_axis) / len(on_axis)
    return (f"{TITLE}; overall {pooled:.1f}% of answers; headline {said}, not on this axis",
            f"{m.label}: accuracy per category (% of answers); overall {pooled:.1f}%",
            (pooled, f"overall {pooled:.1f}% of answers"))
