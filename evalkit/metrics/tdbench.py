"""TDBench's numbers (paper §4, Tables 2-7), as pure functions over per-variant outcomes.

Per category: accuracy at each rotation, VE (mean of the per-rotation accuracies), RE (share of
problems right in all rotations) and MA (wrong in all). Then the unweighted mean over categories,
as the paper averages its ten dimensions. Fractions in 0..1, as the paper prints them.
Reliability: the paper's per-category solutions and their means over the solvable ones, plus
the maximum-likelihood fit (with bootstrap intervals) pooled over all problems.
Grounding: IoU and "predicted centre inside the true box".
VLMEvalKit's own table (`rotational_eval`, open-compass/VLMEvalKit@3ba9220a
vlmeval/dataset/utils/tdbench.py): per category, then its "Average" row over categories.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.metrics.reliability import category_table, fit_histogram, histogram

Box = tuple[float, float, float, float]

# The ten dimensions (paper §3.1), in Figure 1's order.
CATEGORIES: tuple[str, ...] = (
    "Scene Understanding", "Hallucination Detection", "Object Presence", "Attribute Recognition",
    "Object Localization", "Visual Grounding", "Object Counting", "Spatial Relationship",
    "Attribute Comparison", "Dynamic Temporal",
)


@dataclass(frozen=True)
class RotationOutcome:
    """One answered rotation of one problem."""

    problem: str
    category: str
    rot: int
    correct: bool


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _order(categories: Iterable[str]) -> list[str]:
    present = set(categories)
    return [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))


def category_stats(outcomes: Sequence[RotationOutcome], rotations: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Per category: acc@rot for each rotation, VE, RE, MA and the number of problems.

    A problem is right in all rotations only if each of `rotations` was answered right, so a
    missing or failed variant can never help RE.
    """
    by_cat: dict[str, dict[str, dict[int, bool]]] = defaultdict(lambda: defaultdict(dict))
    for o in outcomes:
        by_cat[o.category][o.problem][o.rot] = o.correct
    out: dict[str, dict[str, Any]] = {}
    for cat in _order(by_cat):
        problems = by_cat[cat]
        n = len(problems)
        accs = {rot: sum(1 for p in problems.values() if p.get(rot) is True) / n for rot in rotations}
        row: dict[str, Any] = {f"acc@{rot}": accs[rot] for rot in rotations}
        row["VE"] = _mean(list(accs.values()))
        row["RE"] = sum(1 for p in problems.values() if all(p.get(rot) is True for rot in rotations)) / n
        row["MA"] = sum(1 for p in problems.values() if not any(p.get(rot) is True for rot in rotations)) / n
        row["n"] = n
        out[cat] = row
    return out


def correct_counts(outcomes: Iterable[RotationOutcome], rotations: Sequence[int]) -> dict[str, int]:
    """problem -> how many of the rotations were answered right."""
    right: dict[str, int] = defaultdict(int)
    for o in outcomes:
        right[o.problem] += int(o.correct and o.rot in rotations)
    return dict(right)


def tdbench_metrics(outcomes: Sequence[RotationOutcome], rotations: Sequence[int] = (0, 90, 180, 270), *,
                    n_boot: int = 200, seed: int = 0) -> dict[str, Any]:
    """The full metrics block: category means first, then tables."""
    stats = category_stats(outcomes, rotations)
    keys = [f"acc@{rot}" for rot in rotations] + ["VE", "RE", "MA"]
    mean = {k: _mean([row[k] for row in stats.values()]) for k in keys}
    metrics: dict[str, Any] = {"RE": mean["RE"], "VE": mean["VE"], "MA": mean["MA"]}
    metrics.update({k: mean[k] for k in keys if k.startswith("acc@")})
    metrics["n_problems"] = sum(row["n"] for row in stats.values())
    metrics["n_categories"] = len(stats)
    metrics["per_category"] = stats
    k = len(rotations)
    if k >= 3 and stats:
        table = category_table({c: row for c, row in stats.items()}, k=k)
        metrics.update({name: value for name, value in (table["mean"] or {}).items()})
        metrics["reliability"] = {"n_solved": table["n_solved"], "n_unsolvable": table["n_unsolvable"],
                                  **(table["mean"] or {})}
        metrics["reliability_per_category"] = table["per_category"]
        counts = correct_counts(outcomes, rotations)
        fit = fit_histogram(histogram(counts.values(), k), n_boot=n_boot, seed=seed)
        metrics["reliability_ml"] = fit.as_dict()
        by_cat_counts: dict[str, list[int]] = defaultdict(list)
        cat_of = {o.problem: o.category for o in outcomes}
        for problem, c in counts.items():
            by_cat_counts[cat_of[problem]].append(c)
        metrics["reliability_ml_per_category"] = {
            cat: fit_histogram(histogram(by_cat_counts[cat], k), n_boot=0).as_dict() for cat in stats
        }
    return metrics


# ---------------------------------------------------------------------------------------
# VLMEvalKit's RotationalEval table
# ---------------------------------------------------------------------------------------

VLMEVALKIT_ROTATIONS: tuple[int, ...] = (0, 90, 180, 270)


def vlmevalkit_table(outcomes: Sequence[RotationOutcome], rotations: Sequence[int]) -> dict[str, Any]:
    """VLMEvalKit's `rotational_eval`: {"per_category": {...}, "average": {...}}.

    As there: only problems answered at every rotation count (its inner join of the rotation
    files); per category the number of problems and the shares right at all rotations (hit_all),
    wrong at all (miss_all) and right at each (rot0..rot270, None for a rotation not asked, its
    "No Data"); "Average" is the unweighted mean over categories rounded to 3 places, its
    total_questions then truncated to an integer.
    """
    import numpy as np

    seen: dict[str, dict[str, dict[int, bool]]] = defaultdict(lambda: defaultdict(dict))
    for o in outcomes:
        seen[o.category][o.problem][o.rot] = o.correct
    rows: dict[str, dict[str, Any]] = {}
    for cat in sorted(seen):
        full = [p for p in seen[cat].values() if all(rot in p for rot in rotations)]
        if not full:
            continue
        n = len(full)
        row: dict[str, Any] = {"total_questions": n,
                               "hit_all": sum(all(p[rot] for rot in rotations) for p in full) / n,
                               "miss_all": sum(not any(p[rot] for rot in rotations) for p in full) / n}
        for rot in VLMEVALKIT_ROTATIONS:
            row[f"rot{rot}"] = sum(p[rot] for p in full) / n if rot in rotations else None
        rows[cat] = row
    average: dict[str, Any] = {}
    if rows:
        for key in rows[next(iter(rows))]:
            values = [row[key] for row in rows.values()]
            mean = None if values[0] is None else float(np.round(np.mean(values), 3))
            average[key] = int(mean) if key == "total_questions" and mean is not None else mean
    return {"per_category": rows, "average": average}


# ---------------------------------------------------------------------------------------
# Grounding
# ---------------------------------------------------------------------------------------


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two [x1, y1, x2, y2] boxes (0 when either is empty)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def centre_in_box(pred: Box, gold: Box) -> bool:
    """Whether the predicted box's centre lies inside the true box (edges included)."""
    cx, cy = (pred[0] + pred[2]) / 2, (pred[1] + pred[3]) / 2
    return gold[0] <= cx <= gold[2] and gold[1] <= cy <= gold[3]


def grounding_metrics(pairs: Sequence[tuple[int, Box | None, Box]], rotations: Sequence[int],
                      iou_threshold: float = 0.5) -> dict[str, Any]:
    """Per rotation and overall: mean IoU, share with IoU >= threshold, share with the centre inside.

    pairs: (rotation, predicted box or None when unparsed, gold box); unparsed counts as IoU 0.
    """
    out: dict[str, Any] = {}
    for rot in [*rotations, None]:
        sel = [(p, g) for r, p, g in pairs if rot is None or r == rot]
        name = "all" if rot is None else f"rot{rot}"
        ious = [iou(p, g) if p else 0.0 for p, g in sel]
        out[name] = {
            "mean_iou": _mean(ious),
            f"acc@iou{iou_threshold:g}": _mean([float(v >= iou_threshold) for v in ious]),
            "centre_in_box": _mean([float(bool(p) and centre_in_box(p, g)) for p, g in sel]),
            "n": len(sel),
        }
    return out
