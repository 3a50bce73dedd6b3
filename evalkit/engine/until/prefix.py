"""The answered prefix of a sampled run's order, fed to its confidence sequence as it grows.

The interval of a sampled run (metrics/analysis/confseq.py) holds for values taken in an order fixed
before any answer was seen. Answers arrive in completion order, and a run may be stopped, resumed or
continued, so values count *in the seeded order only*: the answered prefix. A variant group joins once
every one of its queries has a record (an error record counts as wrong, as the aggregate counts it); a
group answered beyond the prefix waits, its value kept, and joins when the gap before it fills (on a
later command, say).

The order (engine/until/order.py) is a uniformly random permutation of the set, and each category's
part of it a random order of that category. So there are two ways to read it, each a set of *streams*:
one stream, the whole order (one sequence for the plain mean over items: what a sampled run uses), or
one stream per category, each at alpha / H (for a headline that weighs its categories equally, a macro
mean: engine/until/ci.py).

The bets are replayed as they were: each segment of the schedule gives the target half-width of the
items from where it began, so a continuation with a smaller W changes only the bets of the items to
come, and recomputing the sequence from the records gives the same interval. A segment says where it
began as the categories' counts in the prefix then (summary.json's form); on the one stream of the whole
order that is their sum. Per record the work is O(1) amortised (one dict step, one scalar update).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from evalkit.metrics.analysis.confseq import ConfSeq

WHOLE = ""  # the name of the one stream that is the whole order


@dataclass(frozen=True)
class Segment:
    """Bets at `target` (a fraction, e.g. 0.03; None: the untuned all-times bets) for the items from where
    the segment began: `start`, each category's count in the answered prefix then (none named: from 0)."""

    target: float | None
    start: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"target": self.target, "from": dict(self.start)}


class AnsweredPrefix:
    """Each stream's answered prefix, the confidence sequence over them, and the categories' counts in them."""

    def __init__(self, streams: Mapping[str, Sequence[str]], category_of: Mapping[str, str],
                 schedule: Sequence[Segment], alpha: float = 0.05,
                 weights: Mapping[str, float] | None = None) -> None:
        if not schedule:
            raise ValueError("a schedule needs at least one segment")
        self.streams = {name: tuple(groups) for name, groups in streams.items()}
        self.stream_of = {g: name for name, groups in self.streams.items() for g in groups}
        self.category_of, self.schedule = category_of, list(schedule)
        self.cs = ConfSeq(sizes={name: len(groups) for name, groups in self.streams.items()}, alpha=alpha,
                          weights=weights)
        self.pos = dict.fromkeys(self.streams, 0)  # items in each stream's prefix
        self.sums = dict.fromkeys(self.streams, 0.0)  # their values' sum
        self.counts: dict[str, int] = dict.fromkeys(sorted(set(category_of.values())), 0)  # prefix items by category
        self._waiting: dict[str, float] = {}  # complete groups beyond their stream's prefix

    def add(self, group: str, value: float) -> bool:
        """A complete group's value; True when a prefix grew (the interval may have changed)."""
        self._waiting[group] = min(1.0, max(0.0, float(value)))
        return self._advance(self.stream_of[group])

    def _advance(self, stream: str) -> bool:
        groups, grew = self.streams[stream], False
        while self.pos[stream] < len(groups) and groups[self.pos[stream]] in self._waiting:
            group = groups[self.pos[stream]]
            x = self._waiting.pop(group)
            target = self.target_at(stream)
            cs = self.cs if target == self.cs.target else replace(self.cs, target=target)
            self.cs = cs.update(stream, x)
            self.pos[stream] += 1
            self.sums[stream] += x
            self.counts[self.category_of[group]] += 1
            grew = True
        return grew

    def target_at(self, stream: str) -> float | None:
        """The bets' target for the next item of `stream`: the last segment begun by then."""
        target = self.schedule[0].target
        for seg in self.schedule[1:]:
            begun = sum(seg.start.values()) if stream == WHOLE else seg.start.get(stream, 0)
            if begun <= self.pos[stream]:
                target = seg.target
        return target

    def items(self) -> int:
        return sum(self.pos.values())

    def interval(self) -> tuple[float, float]:
        return self.cs.interval()

    def estimate(self) -> float:
        """The streams' prefix means, weighted as the interval weighs them (a stream with no item yet: its
        interval's middle)."""
        sizes = self.cs.sizes
        total = sum(sizes.values())
        weights = self.cs.weights or {name: n / total for name, n in sizes.items()}
        mean = 0.0
        for name, w in weights.items():
            n = self.pos[name]
            mean += w * (self.sums[name] / n if n else sum(self.cs.stratum_interval(name)) / 2)
        return mean
