"""`evalkit merge` of shards that stopped on their own interval (`--until-ci` under `--shard K/N`):
the merged run's "sample" block, recomputed from the shards' records.

Each shard asked its own part in its own seeded order (`sample_order` over that shard's queries with
the run's `--sample-seed`, a random permutation of its part) and stopped on its own interval. The
merged interval is one stratified confidence sequence whose strata are the shards (for a macro
headline: shard × category, as a run's own streams are by category): each replays its answered
prefix in its shard's order with the bets the shard used (its block's `schedule`), and α is split
over the strata (ConfSeq gives each α/H). That is valid for the same reason the shard's own is: each
stratum's answers were taken in an order fixed before any was seen, and the union bound does not
care which stratum was looked at when. The machinery is the run's own (engine/until/prefix.py,
value.py): the merge only lays the shards' streams and schedules side by side.

A shard that asked its whole part has no block; its strata are exact. When every shard asked its
whole part, the merged run is the whole set: no block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.core.record import Record
from evalkit.core.shard import Shard
from evalkit.core.types import Query
from evalkit.engine.until.ci import LEVEL, RULE
from evalkit.engine.until.order import sample_order
from evalkit.engine.until.prefix import AnsweredPrefix, Segment
from evalkit.engine.until.value import GroupScore, Tables

SEP = " · "  # a merged stratum's name: "<K/N> · <category>"


@dataclass(frozen=True)
class ShardSample:
    """One shard as the merge reads it: which part it is, and its summary's "sample" block (None: whole)."""

    shard: Shard
    block: Mapping[str, Any] | None


def _segments(block: Mapping[str, Any] | None, own: Mapping[str, str | None], others: Sequence[str],
              never: int) -> list[Segment]:
    """A shard's schedule over the merged streams. `own`: its streams, each with the category it is of
    (None: the shard's whole order, which began where the categories' counts sum to). Every other
    shard's stream begins `never` (so each stream follows its own shard's bets only). A schedule that
    does not read as evalkit wrote it gives the untuned bets: any bets fixed before the answers keep the
    interval valid, the shard's own only make it as narrow as the shard's was."""
    untuned = [Segment(None, {**dict.fromkeys(others, never), **dict.fromkeys(own, 0)})]
    try:
        out = []
        for step in list((block or {}).get("schedule") or []):
            began = {str(k): int(v) for k, v in (step.get("from") or {}).items()}
            start = {**dict.fromkeys(others, never),
                     **{name: sum(began.values()) if category is None else began.get(category, 0)
                        for name, category in own.items()}}
            target = step.get("target")
            out.append(Segment(None if target is None else min(1.0, max(1e-9, float(target))), start))
        return out or untuned
    except (AttributeError, TypeError, ValueError):
        return untuned


def merged_sample(bench: Tables, queries: Sequence[Query], records: Mapping[str, Record],
                  shards: Sequence[ShardSample], options: dict[str, Any]) -> dict[str, Any] | None:
    """The merged run's "sample" block (docs/stopping.md), or None when no shard was a sample or every
    group of every shard has an answer. `records`: the merged records by query id (errors included)."""
    blocks = [s.block for s in shards if s.block]
    if not blocks:
        return None
    seed = _seed(blocks[0], 0)
    value = GroupScore(bench, options)
    groups_of: dict[str, list[Record]] = {}
    members: dict[str, int] = {}
    for q in queries:
        members[q.base_id] = members.get(q.base_id, 0) + 1
        if q.id in records:
            groups_of.setdefault(q.base_id, []).append(records[q.id])
    values = {g: value(recs) for g, recs in groups_of.items() if len(recs) == members[g]}  # complete groups
    # each shard's order is a random permutation of its part: its whole order is one stream (a plain
    # mean), or, for a macro headline, each of its categories is (engine/until/prefix.py)
    streams: dict[str, tuple[str, ...]] = {}
    stream_category: dict[str, str] = {}
    category_of: dict[str, str] = {}
    owned: list[dict[str, str | None]] = []
    for s in shards:
        mine = [q for q in queries if s.shard.holds(q.item_id)]
        order = sample_order(mine, _seed(s.block, seed)) if mine else None
        own: dict[str, str | None] = {}
        if order is not None:
            category_of.update(order.stratum_of())
            if value.macro:
                for category, groups in order.strata.items():
                    name = f"{s.shard}{SEP}{category}"
                    streams[name], stream_category[name], own[name] = groups, category, category
            else:
                streams[str(s.shard)], own[str(s.shard)] = order.sequence, None
        owned.append(own)
    never = len(queries) + 1
    schedule = [Segment(None, dict.fromkeys(streams, never))]  # every stream's bets come from its shard's
    for s, own in zip(shards, owned, strict=True):
        schedule += _segments(s.block, own, [n for n in streams if n not in own], never)
    sizes = {name: len(groups) for name, groups in streams.items()}
    weights = _weights(sizes, stream_category) if value.macro else None
    prefix = AnsweredPrefix(streams, category_of, schedule, 1.0 - LEVEL, weights=weights)
    for group in (g for groups in streams.values() for g in groups):
        if group in values:
            prefix.add(group, values[group])
    if prefix.items() == sum(sizes.values()):
        return None  # every group of every shard answered: the whole set
    low, high = prefix.interval()
    scale = value.scale
    estimate = min(high, max(low, prefix.estimate()))
    targets = [float(b["target"]) for b in blocks if isinstance(b.get("target"), int | float)]
    return {"rule": RULE, "items": prefix.items(), "of": sum(sizes.values()), "asked": len(groups_of),
            "seed": seed, "target": min(targets) if targets else None, "level": LEVEL,
            "metric": value.metric or blocks[0].get("metric"), "scale": scale,
            "estimate": round(estimate * scale, 6), "interval": [round(low * scale, 6), round(high * scale, 6)],
            "half_width": round((high - low) / 2.0 * scale, 6),
            "strata": {name: {"items": prefix.pos[name], "of": n} for name, n in sizes.items()},
            "shards": {str(s.shard): dict(s.block) if s.block else None for s in shards}}


def _seed(block: Mapping[str, Any] | None, default: int) -> int:
    """The seed of a shard's order (its block's; a whole shard's order does not matter: all of it is seen)."""
    seed = (block or {}).get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else default


def _weights(sizes: Mapping[str, int], category_of: Mapping[str, str]) -> dict[str, float]:
    """A macro mean over categories (TDBench's RE, IFBench's Avg): 1/C per category, split over the
    shards' streams of it by their share of its groups."""
    per_category: dict[str, int] = {}
    for name, n in sizes.items():
        per_category[category_of[name]] = per_category.get(category_of[name], 0) + n
    return {name: n / per_category[category_of[name]] / len(per_category) for name, n in sizes.items()}
