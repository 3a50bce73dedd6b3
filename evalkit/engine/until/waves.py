"""A sampled run through a batch API: waves of ⌈5 %⌉ of the items, the rule checked between waves.

A batch answers all it holds at once, hours later perhaps, so a sample sent as one batch could not stop
early. Waves of whole variant groups, in the rule's order, each submitted once the one before it has
been answered: the rule looks after each (docs/stopping.md). A wave left unanswered (`--no-wait`, a
batch timeout) ends the command; the same command collects it and goes on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from evalkit.core.types import Query

SHARE = 0.05  # of the run's items (variant groups) per wave


def waves(queries: Sequence[Query], total_groups: int, share: float = SHARE) -> Iterator[list[Query]]:
    """`queries` (in the rule's order, a group's queries together) cut into waves of ⌈share × total_groups⌉
    groups each."""
    size = max(1, math.ceil(share * total_groups))
    wave: list[Query] = []
    groups: set[str] = set()
    for q in queries:
        if q.base_id not in groups and len(groups) == size:
            yield wave
            wave, groups = [], set()
        groups.add(q.base_id)
        wave.append(q)
    if wave:
        yield wave
