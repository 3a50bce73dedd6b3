"""The order a sampled run asks its items in: seeded, uniformly random, whole variant groups.

A run that may stop once its answer is known (`--until-ci`, a matrix's `--until-decided`) asks a
random sample, and its interval (metrics/analysis/confseq.py) holds only for answers taken in an
order fixed before any is seen. The order is drawn from the seed and the item ids alone (never the
file's row order, so an edited file keeps its order): each category is shuffled on its own, then the
categories are interleaved by shuffling their labels, so every prefix is a simple random sample of
the whole set (each category in its share on average) and also, category by category, a random
sample of that category.

Why not a fixed proportional interleave (each category exactly in its share at every prefix)? Its
prefixes are no longer simple random samples, so an interval over the whole must pay for every
category apart (each at alpha/H): on six categories a +-2-point run then needs 16,346 of 23,600
items instead of 3,421 (bench/stopping.py). The random interleave keeps one interval for the whole.
The unit is the variant group (`Query.base_id`: every option shift, rotation, language and repeat
of one question), so a group is always asked whole.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from evalkit.core.types import Query


@dataclass(frozen=True)
class SampleOrder:
    """Where each variant group stands in a sampled run's order."""

    seed: int
    strata: dict[str, tuple[str, ...]]  # category -> its groups (base ids), in their seeded order
    sequence: tuple[str, ...]  # every group, in the order they are sent (the strata interleaved)

    def stratum_of(self) -> dict[str, str]:
        return {g: name for name, groups in self.strata.items() for g in groups}

    def sizes(self) -> dict[str, int]:
        return {name: len(groups) for name, groups in self.strata.items()}


def sample_order(queries: Sequence[Query], seed: int = 0) -> SampleOrder:
    """The seeded random order of the groups of `queries`. A group's category is its first query's
    (the empty category is a stratum like any other)."""
    category: dict[str, str] = {}
    for q in queries:
        category.setdefault(q.base_id, q.category)
    by_stratum: dict[str, list[str]] = {}
    for group, name in category.items():
        by_stratum.setdefault(name, []).append(group)
    strata: dict[str, tuple[str, ...]] = {}
    for name in sorted(by_stratum):
        groups = sorted(by_stratum[name])
        random.Random(f"evalkit-sample:{seed}:{name}").shuffle(groups)  # str seeds hash the same everywhere
        strata[name] = tuple(groups)
    # the strata interleaved at random: a uniformly random permutation of their labels, N_h of each
    labels = [name for name, groups in strata.items() for _ in groups]
    random.Random(f"evalkit-sample:{seed}").shuffle(labels)
    nexts = {name: iter(groups) for name, groups in strata.items()}
    return SampleOrder(seed, strata, tuple(next(nexts[name]) for name in labels))

def in_order(queries: Sequence[Query], order: SampleOrder) -> list[Query]:
    """`queries` sorted by their group's place in `order`, a group's own queries kept in their order."""
    place = {group: i for i, group in enumerate(order.sequence)}
    return sorted(queries, key=lambda q: place[q.base_id])
