"""`evalkit merge` of shards that stopped on their own interval (`--until-ci` under `--shard K/N`):
the merged run's "sample" block, recomputed from the shards' records.

Each shard asked its own part in its own seeded order (`sample_order` over that shard's queries with
the run's `--sample-seed`) and stopped on its own interval. The merged interval is one stratified
confidence sequence whose strata are shard × category: each stratum replays its answered prefix in
its shard's order with the bets the shard used (its block's `schedule`), and α is split over all
strata (ConfSeq gives each α/H). That is valid for the same reason the shard's own is: each
stratum's answers were taken in an order fixed before any was seen, and the union bound does not
care which stratum was looked at when. The machinery is the run's own (engine/until/prefix.py,
value.py): the merge only lays the shards' strata and schedules side by side.

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
from evalkit.engine.until.ci import LEVEL, RULE
from evalkit.engine.until.order import SampleOrder, sample_order
from evalkit.engine.until.prefix import AnsweredPrefix, Segment
from evalkit.engine.until.value import GroupScore, Tables

SEP = " · "  # a merged stratum's name: "<K/N> · <category>"


@dataclass(frozen=True)
class ShardSample:
    """One shard as the merge reads it: which part it is, and its summary's "sample" block (None: whole)."""

    shard: Shard
    block: Mapping[str, Any] | None


def _segments(block: Mapping[str, Any] | None, names: Mapping[str, str], others: Sequence[str],
              never: int) -> list[Segment]:
    """A shard's schedule over the merged strata: its segments name its own strata (by category) and
    begin `never` for every other shard's (so each stratum follows its own shard's bets only). A
    schedule that does not read as evalkit wrote it gives the untuned bets: any bets fixed before the
    answers keep the interval valid, the shard's own only make it as narrow as the shard's was."""
    untuned = [Segment(None, {**dict.fromkeys(others, never), **dict.fromkeys(names, 0)})]
    try:
        out = []
        for step in list((block or {}).get("schedule") or []):
            start = {**dict.fromkeys(others, never),
                     **{merged: int((step.get("from") or {}).get(category, 0)) for merged, category in names.items()}}
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
    strata: dict[str, tuple[str, ...]] = {}
    category_of: dict[str, str] = {}
    shard_names: list[dict[str, str]] = []
    for s in shards:
        mine = [q for q in queries if s.shard.holds(q.item_id)]
        names = {}
        for category, groups in (sample_order(mine, _seed(s.block, seed)).strata.items() if mine else ()):
            name = f"{s.shard}{SEP}{category}"
            strata[name], category_of[name], names[name] = groups, category, category
        shard_names.append(names)
    never = len(queries) + 1
    schedule = [Segment(None, dict.fromkeys(strata, never))]  # every stratum's bets come from its shard's
    for s, names in zip(shards, shard_names, strict=True):
        schedule += _segments(s.block, names, [n for n in strata if n not in names], never)
    merged = SampleOrder(seed, strata, tuple(g for groups in strata.values() for g in groups))
    value = GroupScore(bench, options)
    prefix = AnsweredPrefix(merged, queries, value, schedule, alpha=1.0 - LEVEL)
    for qid in (q.id for q in queries):
        if qid in records:
            prefix.observe(records[qid])
    sizes = merged.sizes()
    if prefix.items() == sum(sizes.values()):
        return None  # every group of every shard answered: the whole set
    weights = _weights(sizes, category_of, macro=value.macro)
    prefix.cs = replace(prefix.cs, weights=weights)
    low, high = prefix.cs.interval()
    scale = value.scale
    estimate = min(high, max(low, prefix.estimate(weights)))
    targets = [float(b["target"]) for b in blocks if isinstance(b.get("target"), int | float)]
    return {"rule": RULE, "items": prefix.items(), "of": sum(sizes.values()), "asked": len(prefix.asked),
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


def _weights(sizes: Mapping[str, int], category_of: Mapping[str, str], *, macro: bool) -> dict[str, float]:
    """Each merged stratum's weight in the headline: N_h / N, or for a macro mean over categories
    (TDBench's RE, IFBench's Avg) 1/C per category, split over the shards by their share of it."""
    total = sum(sizes.values())
    if not macro:
        return {name: n / total for name, n in sizes.items()}
    per_category: dict[str, int] = {}
    for name, n in sizes.items():
        per_category[category_of[name]] = per_category.get(category_of[name], 0) + n
    return {name: n / per_category[category_of[name]] / len(per_category) for name, n in sizes.items()}
