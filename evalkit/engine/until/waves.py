"""`--batch` with a stop rule: the queries go in waves, and the rule is asked between waves.

A batch is answered whole, hours later, so a batch run that would submit every query at once could
not stop early at all; one that submitted a query at a time would wait a day per item. The middle
way: waves of ⌈5 %⌉ of the run's variant groups (all their queries), in the rule's order. Each wave
is submitted as one batch and waited for, its records reach the rule as they are graded, and the
next wave goes only when the rule is not yet done. A run stops at most one wave past the point its
rule was satisfied, about 20 batches for a whole set.

A wave that leaves a query without a record (`--no-wait`, `--batch-timeout`) ends the waves: what
the rule would say of it is not known yet, and the same command collects it and goes on.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Container, Iterator, Sequence

from evalkit.core.types import Query

WAVE_SHARE = 0.05  # of the run's variant groups, per wave


def wave_groups(n_groups: int) -> int:
    """Groups per wave: ⌈5 %⌉ of the run's groups, at least one."""
    return max(1, math.ceil(WAVE_SHARE * n_groups))


def waves(todo: Sequence[Query], n_groups: int) -> Iterator[list[Query]]:
    """`todo` (in the rule's order) cut into waves of `wave_groups(n_groups)` groups; a group's queries
    always go in one wave, even when the order does not keep them together."""
    size = wave_groups(n_groups)
    by_group: dict[str, list[Query]] = {}
    for q in todo:
        by_group.setdefault(q.base_id, []).append(q)
    groups = list(by_group)
    for start in range(0, len(groups), size):
        yield [q for g in groups[start:start + size] for q in by_group[g]]


async def ask_in_waves(todo: Sequence[Query], n_groups: int, ask: Callable[[list[Query]], Awaitable[None]],
                       done: Callable[[], bool], answered: Container[str]) -> list[Query]:
    """Ask `todo` wave by wave through `ask` (one batch each) while `done()` is False and every query of
    the wave before was answered (`answered` holds the query ids with a record); the queries asked."""
    asked: list[Query] = []
    for wave in waves(todo, n_groups):
        if done() or any(q.id not in answered for q in asked):
            break
        await ask(wave)
        asked += wave
    return asked
