"""One model's analysed run: its headline with a confidence interval and what the plots draw.

Shared by the single-run report and `evalkit compare`, so both say the same thing about a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalkit.analysis import views
from evalkit.analysis.scoretable import ScoreTable
from evalkit.analysis.significance import Interval, bootstrap_ci
from evalkit.core.types import Record

N_BOOT = 2000


class Scored(Protocol):
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
    confusion: tuple[list[str], list[list[int]]] | None = None
    e_rate: dict[str, float] | None = None
    reliability: dict[str, Any] | None = None

    @property
    def metric(self) -> str | None:
        return self.table.metric if self.table else None

    @property
    def estimate(self) -> float | None:
        return self.ci.estimate if self.ci else None

    def headline_dict(self) -> dict[str, Any] | None:
        """The headline metric with its 95% bootstrap interval (summary.json's "headline")."""
        if self.ci is None or self.table is None:
            return None
        return {"metric": self.metric, "value": self.ci.estimate, "ci95": [self.ci.lo, self.ci.hi],
                "n_units": len(set(self.table.units)), "n_observations": self.table.n}

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.label,
            "headline": self.headline_dict(),
            "per_category": {k: v.to_dict() for k, v in self.categories.items()},
            "per_variant": {k: v.to_dict() for k, v in self.variants.items()},
            "confusion": ({"letters": self.confusion[0], "wrong": self.confusion[1]} if self.confusion else None),
            "e_rate": self.e_rate,
            "reliability": self.reliability,
        }


def analyze(label: str, bench: Scored, records: Sequence[Record], options: dict[str, Any], *,
            n_boot: int = N_BOOT, seed: int = 0, reliability_boot: int = 200) -> ModelResult:
    """Everything the reports need about one run, from its records alone."""
    table = bench.score_table(records, options) if records else None
    return ModelResult(
        label=label,
        records=records,
        table=table,
        ci=bootstrap_ci(table, n_boot=n_boot, seed=seed) if table and table.n else None,
        categories=views.per_category(records),
        variants=views.per_variant(records),
        confusion=views.confusion(records),
        e_rate=views.e_rate(records),
        reliability=views.reliability(records, n_boot=reliability_boot, seed=seed),
    )
