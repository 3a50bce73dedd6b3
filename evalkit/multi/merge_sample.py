"""`evalkit merge` of shards that stopped on their own interval (`--until-ci` under `--shard K/N`):
the merged run's "sample" block, recomputed from the shards' records.

Each shard asked its own part in its own seeded order (`sample_order` over that shard's queries with
the run's `--sample-seed`) and stopped on its own interval. The merged interval is one stratified
confidence sequence whose strata are shard × category: each stratum replays its answered prefix in
its shard's order with the bets the shard used (each shard block's `schedule`: the target from the
item where it began), and α is split over all strata (ConfSeq gives each α/H). That is valid for
the same reason the shard's own is: each stratum's answers were taken in an order fixed before any
was seen, and the union bound does not care which stratum was looked at when.

A shard that asked its whole part has no block; its strata are exact. When every shard asked its
whole part, the merged run is the whole set: no block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evalkit.core.record import Record
from evalkit.core.shard import Shard
from evalkit.core.types import Query
from evalkit.engine.until.order import sample_order
from evalkit.metrics.analysis.confseq import ConfSeq

SEP = " · "  # a merged stratum's name: "<shard K/N> · <category>"


@dataclass(frozen=True)
class ShardSample:
    """One shard as the merge reads it: which part it is, and its summary's "sample" block (None: whole)."""

    shard: Shard
    block: Mapping[str, Any] | None


def group_values(bench: Any, records: Sequence[Record], options: Mapping[str, Any]) -> dict[str, float]:
    """Each variant group's value in [0, 1]: the mean of the headline's observations of its records
    (over repeats too: an item counts once). An error record counts as wrong, as the aggregate counts it."""
    by_group: dict[str, list[Record]] = {}
    for r in records:
        by_group.setdefault(r.base_id, []).append(r)
    out: dict[str, float] = {}
    for group, recs in by_group.items():
        table = bench.score_table(recs, dict(options))
        seen = list(table.observed) if table is not None else []
        out[group] = sum(seen) / len(seen) if seen else 0.0
    return out


def answered_prefix(groups: Sequence[str], answered: set[str]) -> list[str]:
    """The groups of a stratum, in its seeded order, up to the first not answered (those beyond wait)."""
    out = []
    for g in groups:
        if g not in answered:
            break
        out.append(g)
    return out


def _target_at(schedule: Sequence[Mapping[str, Any]], category: str, i: int) -> float | None:
    """The bets' target for a stratum's i-th answer (0-based): the last schedule entry begun by then."""
    target = None
    for step in schedule:
        if int((step.get("from") or {}).get(category, 0)) <= i:
            target = step.get("target")
    return None if target is None else float(target)


def merged_sample(bench: Any, queries: Sequence[Query], records: Mapping[str, Record],
                  shards: Sequence[ShardSample], options: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merged run's "sample" block (docs/stopping.md), or None when every shard asked its whole part
    (or no shard was a sample). `records`: the merged records by query id (errors included)."""
    blocks = [s.block for s in shards if s.block]
    if not blocks:
        return None
    first = blocks[0]
    seed, level = int(first.get("seed") or 0), float(first.get("level") or 0.95)
    by_group: dict[str, list[Query]] = {}
    for q in queries:
        by_group.setdefault(q.base_id, []).append(q)
    answered = {g for g, qs in by_group.items() if all(q.id in records for q in qs)}
    values = group_values(bench, [r for r in records.values() if r.base_id in answered], options)
    sizes: dict[str, int] = {}
    prefixes: dict[str, list[float]] = {}
    schedules: dict[str, tuple[str, Sequence[Mapping[str, Any]]]] = {}
    asked = 0
    for s in shards:
        mine = [q for q in queries if s.shard.holds(q.item_id)]
        if not mine:
            continue
        order = sample_order(mine, seed)
        asked += sum(1 for g in order.sequence if any(q.id in records for q in by_group[g]))
        for category, groups in order.strata.items():
            name = f"{s.shard}{SEP}{category}"
            sizes[name] = len(groups)
            prefixes[name] = [values[g] for g in answered_prefix(groups, answered)]
            schedules[name] = (category, (s.block or {}).get("schedule") or [])
    if all(len(prefixes[n]) == sizes[n] for n in sizes):
        return None  # every group of every shard answered: the whole set
    cs = ConfSeq(sizes=sizes, alpha=1.0 - level)
    for name, xs in prefixes.items():
        category, schedule = schedules[name]
        for i, x in enumerate(xs):
            cs = replace(cs, target=_target_at(schedule, category, i)).update(name, x)
    scale = _scale(bench, records, options)
    lo, hi = cs.interval()
    n_total = sum(sizes.values())
    seen = {n: xs for n, xs in prefixes.items() if xs}
    weight = sum(sizes[n] for n in seen)
    estimate = sum(sizes[n] / weight * (sum(xs) / len(xs)) for n, xs in seen.items()) if weight else None
    targets = [float(b["target"]) for b in blocks if isinstance(b.get("target"), int | float)]
    return {"rule": first.get("rule", "until-ci"), "items": sum(len(xs) for xs in prefixes.values()), "of": n_total,
            "asked": asked, "seed": seed, "target": min(targets) if targets else None, "level": level,
            "metric": first.get("metric"), "estimate": None if estimate is None else estimate * scale,
            "interval": [lo * scale, hi * scale], "half_width": (hi - lo) / 2 * scale,
            "strata": {n: {"items": len(prefixes[n]), "of": sizes[n]} for n in sizes},
            "shards": {str(s.shard): dict(s.block) if s.block else None for s in shards}}


def _scale(bench: Any, records: Mapping[str, Record], options: Mapping[str, Any]) -> float:
    """The headline's scale (100 for a percentage, 1 for a fraction), from its score table."""
    sample = list(records.values())[:1]
    table = bench.score_table(sample, dict(options)) if sample else None
    return float(table.scale) if table is not None else 100.0
