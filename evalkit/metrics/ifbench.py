"""IF-Bench's official numbers (docs/protocols.md, IF-Bench; paper arXiv:2512.09663 Tables 2 and 7), as pure functions.

Per item and language: share of the circular shifts answered right (strict: all of them).
Per dimension: mean over its items. Overall per language: the *unweighted* mean of the
dimension scores, so a dimension with 87 questions weighs as much as one with 54.
Reported "Avg": the mean of the per-language overall scores. Keys use the paper's column
names (SU, IT, ...); a dimension the paper does not name keeps its full name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Paper Table 2 column order and abbreviations.
DIMENSIONS: dict[str, str] = {
    "Scene Understanding": "SU",
    "Image Theme": "IT",
    "Viewpoint of Capture": "VC",
    "Target Localization": "TL",
    "Spatial Relationship Understanding": "SRU",
    "Object Counting": "OC",
    "Thermal Feature Understanding": "TFU",
    "Action Recognition": "AR",
    "Thermal Feature Reasoning": "TFR",
    "Commonsense Reasoning": "CR",
}


def short_name(dimension: str) -> str:
    """The paper's column name for a dimension (the full name when the paper has none)."""
    return DIMENSIONS.get(dimension, dimension)


@dataclass(frozen=True)
class IFBenchScored:
    """One answered variant, reduced to what the metrics need."""

    item: str
    dimension: str
    lang: str
    shift: int
    correct: bool


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _order(dimensions: Iterable[str]) -> list[str]:
    """Dimensions in the paper's column order, unknown ones after, alphabetically."""
    known = [d for d in DIMENSIONS if d in set(dimensions)]
    return known + sorted(set(dimensions) - set(DIMENSIONS))


def item_scores(outcomes: Iterable[IFBenchScored]) -> dict[tuple[str, str], tuple[str, float, bool]]:
    """(item, lang) -> (dimension, share of shifts right, all shifts right).

    "All right" also needs every shift seen for the item (the most any item has), so a
    half-finished item is never strict-correct.
    """
    groups: dict[tuple[str, str], list[IFBenchScored]] = defaultdict(list)
    for o in outcomes:
        groups[(o.item, o.lang)].append(o)
    full = max((len({o.shift for o in g}) for g in groups.values()), default=0)
    out = {}
    for key, group in groups.items():
        right = sum(1 for o in group if o.correct)
        out[key] = (group[0].dimension, right / len(group), right == len(group) and len({o.shift for o in group}) == full)
    return out


def language_table(scores: dict[tuple[str, str], tuple[str, float, bool]], lang: str, strict: bool) -> dict[str, float]:
    """Per-dimension score (0..100) of one language, paper column names and order."""
    by_dim: dict[str, list[float]] = defaultdict(list)
    for (_, lg), (dim, share, all_right) in scores.items():
        if lg == lang:
            by_dim[dim].append(float(all_right) if strict else share)
    return {short_name(d): 100.0 * _mean(by_dim[d]) for d in _order(by_dim)}


def _item_consistency(outcomes: Iterable[IFBenchScored]) -> dict[str, float | int]:
    """Per item over all its variants (4 shifts x 2 languages): all right, mean, all wrong (%)."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        groups[o.item].append(o.correct)
    if not groups:
        return {"all_correct": 0.0, "mean": 0.0, "all_wrong": 0.0, "n_items": 0, "variants_per_item": 0}
    n = len(groups)
    return {
        "all_correct": 100.0 * sum(1 for g in groups.values() if all(g)) / n,
        "mean": 100.0 * _mean([sum(g) / len(g) for g in groups.values()]),
        "all_wrong": 100.0 * sum(1 for g in groups.values() if not any(g)) / n,
        "n_items": n,
        "variants_per_item": max(len(g) for g in groups.values()),
    }


def ifbench_metrics(outcomes: Sequence[IFBenchScored], langs: Sequence[str] = ("cn", "en")) -> dict[str, object]:
    """The official table: Avg and per dimension (mean over languages), per language, strict, consistency."""
    scores = item_scores(outcomes)
    present = [lg for lg in langs if any(k[1] == lg for k in scores)]
    metrics: dict[str, object] = {}
    tables = {lg: language_table(scores, lg, strict=False) for lg in present}
    strict = {lg: language_table(scores, lg, strict=True) for lg in present}
    overall = {lg: _mean(list(t.values())) for lg, t in tables.items()}
    overall_strict = {lg: _mean(list(t.values())) for lg, t in strict.items()}
    metrics["Avg"] = _mean(list(overall.values()))
    metrics["Avg (strict)"] = _mean(list(overall_strict.values()))
    for lg in present:
        metrics[f"Avg ({lg})"] = overall[lg]
    for lg in present:
        metrics[f"Avg (strict, {lg})"] = overall_strict[lg]
    columns = list(next(iter(tables.values()), {}))
    metrics["dimensions"] = {c: _mean([tables[lg][c] for lg in present if c in tables[lg]]) for c in columns}
    metrics["dimensions_strict"] = {c: _mean([strict[lg][c] for lg in present if c in strict[lg]]) for c in columns}
    for lg in present:
        metrics[f"dimensions_{lg}"] = tables[lg]
        metrics[f"dimensions_strict_{lg}"] = strict[lg]
    metrics["consistency"] = _item_consistency(outcomes)
    return metrics
