"""One model's analysed run: its headline with a confidence interval and what the plots draw.

Shared by the single-run report and `evalkit compare`, so both say the same thing about a run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalkit.core.record import Record
from evalkit.metrics.analysis import views
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.analysis.significance import Interval, bootstrap_ci

N_BOOT = 2000
# Headline metrics that count a question right only when every variant of it is (circular shifts,
# rotations): answering at random, that happens with chance^k for k variants, not chance.
ALL_VARIANTS_RIGHT = frozenset({"circular_accuracy", "RE"})


@dataclass(frozen=True)
class OverRepeats:
    """A model's headline scores on each of the k repeats a comparison shares (`--repeats`): what it is
    ranked on (the mean of the headline metric) and how much it moves from repeat to repeat (sd)."""

    k: int
    of_run: int                             # how many repeats the run has (the ones beyond k are unused)
    per_repeat: list[dict[str, float]]      # repeat r's headline scores (the benchmark's own aggregate)
    mean: dict[str, float | None]
    sd: dict[str, float | None]             # sample standard deviation (n - 1) across the k repeats

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "of_run": self.of_run, "per_repeat": self.per_repeat, "mean": self.mean,
                "sd": self.sd}


class ScoredBenchmark(Protocol):
    """What the analysis needs of a benchmark: its headline metric as observations."""

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None: ...


@dataclass
class ModelResult:
    label: str
    records: Sequence[Record] = field(repr=False)
    table: ScoreTable | None = field(default=None, repr=False)
    ci: Interval | None = None
    categories: dict[str, views.Rate] = field(default_factory=dict)
    variants: dict[str, views.Rate] = field(default_factory=dict)
    confusion: views.Confusion | None = None
    e_rate: dict[str, float] | None = None
    reliability: dict[str, Any] | None = None
    chance: float | None = None            # % right answering at random (summary.json's chance_pct)
    headline_chance: float | None = None   # the headline metric at random, in its own scale
    answered: int | None = None            # records without an error; None: counted from `records`
    repeats: OverRepeats | None = None     # compare over k >= 2 common repeats: `table` and `ci` are theirs
    category_chance: dict[str, float | None] | None = None  # summary.json's chance_per_category (a blend)

    def __post_init__(self) -> None:
        if self.answered is None:
            self.answered = sum(1 for r in self.records if not r.error)

    @property
    def metric(self) -> str | None:
        return self.table.metric if self.table else None

    @property
    def estimate(self) -> float | None:
        return self.ci.estimate if self.ci else None

    @property
    def scale(self) -> float:
        """100 when the headline is a percentage, 1 for a fraction (TDBench's RE)."""
        return self.table.scale if self.table else 100.0

    @property
    def per_answer_headline(self) -> bool:
        """Whether the headline is a percentage of answers right (so it sits on the category bars' axis)."""
        return self.table is not None and self.scale == 100.0 and self.metric not in ALL_VARIANTS_RIGHT

    def headline_dict(self) -> dict[str, Any] | None:
        """The headline metric with its 95% bootstrap interval (summary.json's "headline")."""
        if self.ci is None or self.table is None:
            return None
        return {"metric": self.metric, "value": self.ci.estimate, "ci95": [self.ci.lo, self.ci.hi],
                "n_units": len(set(self.table.units)), "n_observations": self.table.n}

    def to_dict(self) -> dict[str, Any]:
        out = self._base_dict()
        if self.repeats is not None:  # only then: a comparison without repeats says what it always said
            out["repeats"] = self.repeats.to_dict()
        if self.category_chance is not None:  # only where chance_pct is a blend of question types
            out["chance_per_category"] = self.category_chance
        return out

    def _base_dict(self) -> dict[str, Any]:
        return {
            "model": self.label,
            "headline": self.headline_dict(),
            "chance_pct": self.chance,
            "headline_chance": self.headline_chance,
            "answered": self.answered,
            "per_category": {k: v.to_dict() for k, v in self.categories.items()},
            "per_variant": {k: v.to_dict() for k, v in self.variants.items()},
            "confusion": self.confusion.to_dict() if self.confusion else None,
            "e_rate": self.e_rate,
            "reliability": self.reliability,
        }


def headline_chance(table: ScoreTable | None, records: Sequence[Record], chance: float | None) -> float | None:
    """The headline metric of a model answering at random, in the table's scale: the per-answer chance
    for accuracies (plain or macro), the mean over questions of chance^k for "every variant right"."""
    if table is None or chance is None:
        return None
    p = chance / 100.0
    if table.metric in ALL_VARIANTS_RIGHT:
        sizes = list(Counter(r.base_id for r in records).values())
        return table.scale * sum(p ** k for k in sizes) / len(sizes) if sizes else None
    return table.scale * p


def analyze(label: str, bench: ScoredBenchmark, records: Sequence[Record], options: dict[str, Any], *,
            n_boot: int = N_BOOT, seed: int = 0, reliability_boot: int = 200, category_boot: int = N_BOOT,
            chance: float | None = None, category_chance: dict[str, float | None] | None = None) -> ModelResult:
    """Everything the reports need about one run, from its records and its summary's chance_pct (and
    chance_per_category, where the run's question types have different chances).

    `category_boot` resamples of the items give the per-category and per-variant intervals (apart
    from `n_boot`, which `compare` sets to 0 to draw the headline's resamples itself)."""
    table = bench.score_table(records, options) if records else None
    return ModelResult(
        label=label,
        records=records,
        table=table,
        ci=bootstrap_ci(table, n_boot=n_boot, seed=seed) if table and table.n else None,
        categories=views.per_category(records, n_boot=category_boot, seed=seed),
        variants=views.per_variant(records, n_boot=category_boot, seed=seed),
        confusion=views.confusion(records),
        e_rate=views.e_rate(records),
        reliability=views.reliability(records, n_boot=reliability_boot, seed=seed),
        chance=chance,
        headline_chance=headline_chance(table, records, chance),
        category_chance=category_chance,
    )
