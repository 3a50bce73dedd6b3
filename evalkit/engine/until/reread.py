"""`evalkit report RUN` of a sampled run: its "sample" block computed again from the records.

A re-report grades the records again (a corrected gold changes verdicts), so the interval is replayed
from them with the bets the run used (the block's own schedule, its seed and W), never copied: the
report says what the records say. A block this module cannot replay (a merge's, whose strata are
shard × category: multi/merge_sample.py; `--until-decided`'s, which is over pairs of runs) is kept
as the run wrote it. Without it, the re-report would show a sample as the whole set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.engine.until.ci import RULE, UntilCI
from evalkit.engine.until.value import GroupScore, Tables


def sample_again(before: Mapping[str, Any], queries: Sequence[Query], bench: Tables, options: dict[str, Any],
                 records: Sequence[Record]) -> tuple[dict[str, Any] | None, str | None]:
    """(the "sample" block, summary["stopped"]) for the re-reported summary, from the summary before
    (`before`) and the graded records; (None, None) for a run of the whole set."""
    block = before.get("sample")
    if not isinstance(block, dict):
        return None, None
    stopped = "sample" if before.get("stopped") == "sample" else None
    if block.get("rule") != RULE or "shards" in block or not queries:
        return dict(block), stopped
    width = block.get("target")
    rule = UntilCI(queries, GroupScore(bench, options), width=float(width) if isinstance(width, int | float) else None,
                   seed=int(block.get("seed") or 0), previous=block)
    for rec in records:
        rule.observe(rec)
    again = rule.block()
    return again, stopped if again is not None else None
