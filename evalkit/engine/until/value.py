"""A variant group's value for a sampled run: the headline's per-group score, in [0, 1].

From the benchmark's own `score_table` (the observations the headline is the mean of), so a sample
estimates the number the report leads with: plain accuracy per record, a CircularEval group right
only when every rotation is, TDBench's all-rotations rule. With `--repeats` an item counts once:
its tables are taken per repeat and the value is their mean ("an item counts once, its mean over
repeats"). The first table says the headline's name, its scale (100 or 1) and whether it is a
macro mean over cells (then the strata are weighed equally: engine/until/ci.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from evalkit.core.record import Record
from evalkit.metrics.analysis.scoretable import ScoreTable


class Tables(Protocol):
    """What a group's value needs of a benchmark (benchmarks.base.Benchmark provides it)."""

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None: ...


class GroupScore:
    """Callable: a complete group's records -> its value; remembers the headline's name and scale."""

    def __init__(self, bench: Tables, options: dict[str, Any]) -> None:
        self.bench, self.options = bench, options
        self.metric: str | None = None
        self.scale = 100.0
        self.macro = False

    def __call__(self, records: Sequence[Record]) -> float:
        by_repeat: dict[int, list[Record]] = {}
        for r in records:
            by_repeat.setdefault(r.repeat, []).append(r)
        values: list[float] = []
        for recs in by_repeat.values():
            table = self.bench.score_table(recs, self.options)
            if table is None or table.n == 0:
                continue
            self.metric, self.scale, self.macro = table.metric, float(table.scale), table.strata is not None
            values.append(sum(float(v) for v in table.observed) / table.n)
        return sum(values) / len(values) if values else 0.0
