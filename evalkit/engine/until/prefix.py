"""The answered prefix of each stratum, fed to its confidence sequence as it grows.

The interval of a sampled run (metrics/analysis/confseq.py) holds for values taken in an order fixed
before any answer was seen. Answers arrive in completion order, and a run may be stopped, resumed or
continued, so a stratum's values count in its sequence *in the stratum's seeded order only*: its
answered prefix. A variant group joins once every one of its queries has a record (an error record
counts as wrong, as the aggregate counts it); a group answered beyond its stratum's prefix waits,
its value kept, and joins when the gap before it fills (on a later command, say).

The bets are replayed as they were: each segment of the schedule gives the target half-width of the
items from where it began in each stratum on, so a continuation with a smaller W changes only the
bets of the items to come, and recomputing the sequence from the records gives the same interval.
Per record the work is O(1) amortised (one dict step, one scalar update of one stratum).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.engine.until.order import SampleOrder
from evalkit.metrics.analysis.confseq import ConfSeq

#: a complete group's value in [0, 1], from its records (engine/until/value.py)
GroupValue = Callable[[Sequence[Record]], float]


@dataclass(frozen=True)
class Segment:
    """Bets at `target` (a fraction, e.g. 0.03; None: the untuned all-times bets) for each stratum's
    items from position `start[stratum]` (0-based; a stratum it does not name: from 0)."""

    target: float | None
    start: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"target": self.target, "from": dict(self.start)}


class AnsweredPrefix:
    """Every stratum's answered prefix and the confidence sequence over it."""

    def __init__(self, order: SampleOrder, queries: Sequence[Query], value: GroupValue,
                 schedule: Sequence[Segment], alpha: float = 0.05) -> None:
        if not schedule:
            raise ValueError("a schedule needs at least one segment")
        self.order, self.value, self.schedule = order, value, list(schedule)
        self.group_of = {q.id: q.base_id for q in queries}
        self.members = Counter(self.group_of.values())  # queries per group (every variant and repeat)
        self.stratum_of = order.stratum_of()
        self.cs = ConfSeq(sizes=order.sizes(), alpha=alpha)
        self.pos = dict.fromkeys(order.strata, 0)  # items in each stratum's prefix
        self.sums = dict.fromkeys(order.strata, 0.0)  # their values' sum
        self.asked: set[str] = set()  # groups with any record
        self._pending: dict[str, dict[str, Record]] = {}  # group -> its records so far
        self._waiting: dict[str, float] = {}  # complete groups beyond their stratum's prefix
        self._done: set[str] = set()  # complete groups (later records of theirs change nothing)

    def observe(self, record: Record) -> bool:
        """Take one graded record; True when a prefix grew (the interval may have changed)."""
        group = self.group_of.get(record.query_id)
        if group is None or group in self._done:
            return False
        self.asked.add(group)
        records = self._pending.setdefault(group, {})
        records[record.query_id] = record
        if len(records) < self.members[group]:
            return False
        del self._pending[group]
        self._done.add(group)
        self._waiting[group] = min(1.0, max(0.0, float(self.value(list(records.values())))))
        return self._advance(self.stratum_of[group])

    def _advance(self, stratum: str) -> bool:
        groups, grew = self.order.strata[stratum], False
        while self.pos[stratum] < len(groups) and groups[self.pos[stratum]] in self._waiting:
            x = self._waiting.pop(groups[self.pos[stratum]])
            target = self.target_at(stratum, self.pos[stratum])
            cs = self.cs if target == self.cs.target else replace(self.cs, target=target)
            self.cs = cs.update(stratum, x)
            self.pos[stratum] += 1
            self.sums[stratum] += x
            grew = True
        return grew

    def target_at(self, stratum: str, position: int) -> float | None:
        """The bets' target for the item at `position` of `stratum`: the last segment begun by then."""
        target = self.schedule[0].target
        for seg in self.schedule[1:]:
            if seg.start.get(stratum, 0) <= position:
                target = seg.target
        return target

    def items(self) -> int:
        return sum(self.pos.values())

    def estimate(self, weights: Mapping[str, float]) -> float:
        """The weighted mean of the strata's prefix means (a stratum with no item yet: its interval's middle)."""
        total = 0.0
        for name, w in weights.items():
            n = self.pos[name]
            total += w * (self.sums[name] / n if n else sum(self.cs.stratum_interval(name)) / 2)
        return total
