"""`--until-ci W`: ask in the seeded stratified order, stop once the headline's 95 % interval is +-W.

The rule (engine/until/rule.py's StopRule) the engine takes when `--until-ci` is given, or when a run
directory whose last summary.json holds an `--until-ci` sample is continued without the flag (so
the bets' schedule is carried on and the block stays right while the set is not whole). Strata are
the categories of the run's groups (its shard's under `--shard`: each shard stops on its own), each
a confidence sequence over its answered prefix (engine/until/prefix.py). Weights N_h / N, or 1/H
when the headline is a macro mean over its cells (TDBench's RE, IFBench's Avg: their cells are the
categories). Points are percentage points whatever the headline's scale: W = 3 is +-0.03 on a
fraction. docs/stopping.md describes the flag and the block.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.engine.until.order import in_order, sample_order
from evalkit.engine.until.prefix import AnsweredPrefix, Segment
from evalkit.engine.until.value import GroupScore, Tables

RULE = "until-ci"
LEVEL = 0.95


def fraction(width: float | None) -> float | None:
    """W points as the bets' target half-width (a fraction of 1, at most 1)."""
    return None if width is None else min(1.0, width / 100.0)


class UntilCI:
    """The `--until-ci` stop rule of one run (one shard)."""

    def __init__(self, queries: Sequence[Query], value: GroupScore, *, width: float | None, seed: int = 0,
                 previous: Mapping[str, Any] | None = None) -> None:
        self.width, self.seed, self.value = width, seed, value
        self.sampled = sample_order(queries, seed)
        self.schedule = schedule_for(previous, seed, fraction(width))
        self.prefix = AnsweredPrefix(self.sampled, queries, value, self.schedule, alpha=1.0 - LEVEL)
        self._done = False

    def order(self, queries: Sequence[Query]) -> list[Query]:
        return in_order(queries, self.sampled)

    def observe(self, record: Record) -> None:
        if self.prefix.observe(record) and self.width is not None:
            self._done = self.half_width() * 100.0 <= self.width + 1e-9

    def done(self) -> bool:
        return self._done

    def weights(self) -> dict[str, float]:
        sizes = self.sampled.sizes()
        if self.value.macro:
            return {name: 1.0 / len(sizes) for name in sizes}
        total = sum(sizes.values())
        return {name: n / total for name, n in sizes.items()}

    def bounds(self) -> tuple[float, float]:
        """The interval as a fraction; weights as the headline weighs its strata."""
        cs = self.prefix.cs
        if self.value.macro and cs.weights is None:
            from dataclasses import replace

            self.prefix.cs = cs = replace(cs, weights=self.weights())
        return cs.interval()

    def half_width(self) -> float:
        low, high = self.bounds()
        return (high - low) / 2.0

    def block(self) -> dict[str, Any] | None:
        total = len(self.sampled.sequence)
        if len(self.prefix.asked) >= total:
            return None  # every group asked: the run is the whole set
        scale = self.value.scale
        low, high = self.bounds()
        estimate = min(high, max(low, self.prefix.estimate(self.weights())))
        strata = {name: {"items": self.prefix.pos[name], "of": len(groups)}
                  for name, groups in self.sampled.strata.items()}
        return {"rule": RULE, "items": self.prefix.items(), "of": total, "asked": len(self.prefix.asked),
                "seed": self.seed, "target": self.width, "level": LEVEL, "metric": self.value.metric,
                "scale": scale,
                "estimate": round(estimate * scale, 6),
                "interval": [round(low * scale, 6), round(high * scale, 6)],
                "half_width": round((high - low) / 2.0 * scale, 6),
                "strata": strata, "schedule": [seg.to_dict() for seg in self.prefix.schedule]}


def schedule_for(previous: Mapping[str, Any] | None, seed: int, target: float | None) -> list[Segment]:
    """The bets' schedule: the previous sample's (same seed) with a new segment from where it stopped
    when the target changed; a fresh one otherwise. A block that does not read as evalkit wrote it
    starts afresh (the bets stay predictable either way)."""
    try:
        if previous is None or previous.get("rule") != RULE or previous.get("seed") != seed:
            raise ValueError
        old = [Segment(_target(seg["target"]), {str(k): int(v) for k, v in seg["from"].items()})
               for seg in previous["schedule"]]
        where = {str(k): int(v["items"]) for k, v in previous["strata"].items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return [Segment(target)]
    if not old:
        return [Segment(target)]
    if old[-1].target == target:
        return old
    return [*old, Segment(target, where)]


def _target(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0 \
            or not math.isfinite(value):
        raise ValueError
    return float(value)


def previous_block(run_dir: Path) -> dict[str, Any] | None:
    """The "sample" block of the run directory's last summary.json (None: none, or unreadable)."""
    try:
        block = json.loads((run_dir / "summary.json").read_text(encoding="utf-8")).get("sample")
    except (OSError, ValueError, AttributeError):
        return None
    return block if isinstance(block, dict) else None


def until_ci_rule(queries: Sequence[Query], bench: Tables, options: dict[str, Any], run_dir: Path, *,
                  width: float | None, seed: int) -> UntilCI | None:
    """The run's `--until-ci` rule: with the flag, or continuing a directory that holds an `--until-ci`
    sample (without the flag: toward the whole set, the schedule carried on); None otherwise."""
    previous = previous_block(run_dir)
    if width is None and (previous is None or previous.get("rule") != RULE):
        return None
    if not queries:
        return None
    if width is None and isinstance(previous.get("seed"), int):  # type: ignore[union-attr]
        seed = int(previous["seed"])  # type: ignore[index]  # the flag's absence continues the same order
    return UntilCI(queries, GroupScore(bench, options), width=width, seed=seed, previous=previous)
