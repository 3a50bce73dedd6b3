"""`--repeats N`: every query asked N times, and what the repeats say together (docs/repeats.md).

Repeat 0 is the query as it always was: the same id, the same request and the same cache key as
evalkit 0.1.0, so existing caches and run directories answer it for free. Repeat r >= 1 is a query
of its own: id "<query id>#r<r>" (records.jsonl and resume key on it), `GenParams.repeat = r` (in
the cache key, never sent) and, where the query has a seed, seed + r. The repeats are not part of
the run identity: raising N grows the same run directory and sends only the new repeats.

The headline, counts and report analysis read repeat 0, so a 1-repeat run and repeat 0 of an
N-repeat run say the same; summary["repeats"] adds each repeat's official scores, their mean and
spread, agreement, majority vote and pass@k. `compare` ranks runs on the mean over the repeats they
all have, with per-item mean correctness in its intervals and paired tests (`over_repeats`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.settings import MAX_REPEATS
from evalkit.core.text.shown import shown_value
from evalkit.core.types import Query
from evalkit.metrics.analysis.comparison import PAIRED_TEST, CommonRepeats
from evalkit.metrics.analysis.result import OverRepeats
from evalkit.metrics.analysis.scoretable import ScoreTable, mean_over_repeats
from evalkit.metrics.basic import usage_totals
from evalkit.metrics.reliability import fit_histogram, histogram
from evalkit.metrics.repeats import agreement, majority_vote_pct, mean_sd, pass_at_ks
from evalkit.providers.registry import find

MARK = "#r"  # "<query id>#r<repeat>"


class Aggregates(Protocol):
    """What the repeat scores need of a benchmark (benchmarks.base.Benchmark provides it)."""

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]: ...

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]: ...

    def headline_for(self, options: dict[str, Any]) -> str: ...


def repeat_id(query_id: str, repeat: int) -> str:
    return f"{query_id}{MARK}{repeat}" if repeat else query_id


def source_id(record: Record) -> str:
    """The id of the query a record is a repeat of (its own id for repeat 0)."""
    suffix = f"{MARK}{record.repeat}"
    return record.query_id[: -len(suffix)] if record.repeat and record.query_id.endswith(suffix) else record.query_id


def saved_repeats(config: Mapping[str, Any], where: object) -> int:
    """The repeat count a run directory's config.json holds (1 when unset); anything but a count the flag
    allows (1 to MAX_REPEATS) is an EvalkitError naming `where`: an edited file must not expand a billion
    queries into memory."""
    value = config.get("repeats") or 1
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPEATS:
        raise EvalkitError(f"{where}: repeats {shown_value(value)} is not a count from 1 to {MAX_REPEATS:,} "
                           "(--repeats): not as evalkit wrote it")
    return value


def with_repeats(queries: list[Query], n: int, batch_provider: str | None = None) -> list[Query]:
    """Repeat 0 of every query first (the queries themselves), then repeat 1 of every query, and so on,
    so an interrupted run has whole early repeats. `batch_provider`: sent through that provider's batch
    API, where identical requests get one answer: refused unless a seed tells the repeats apart."""
    if n <= 1:
        return queries
    record = find(batch_provider) if batch_provider is not None else None
    seedless = record is not None and record.seedless_batch  # its batch lines carry no seed
    if batch_provider is not None and (seedless or any(q.params.seed is None for q in queries)):
        why = f"{batch_provider}/ takes no seed" if seedless else "give --seed"
        raise EvalkitError(f"--repeats with --batch needs a seed to tell the repeats apart (a batch answers "
                           f"identical requests once): {why}, or ask live (without --batch)")
    out = list(queries)
    for r in range(1, n):
        for q in queries:
            seed = None if q.params.seed is None else q.params.seed + r
            out.append(replace(q, id=repeat_id(q.id, r), params=replace(q.params, repeat=r, seed=seed)))
    return out


def mark(record: Record, query: Query) -> Record:
    """A fresh record of `query`, told which repeat it answers (graded records do not know it)."""
    record.repeat = query.params.repeat
    return record


def first_repeat(records: Sequence[Record], queries: Mapping[str, Query]) -> tuple[list[Record], dict[str, Query]]:
    """Repeat 0's records and queries: what the headline, the counts and the report's analysis read."""
    return [r for r in records if not r.repeat], {qid: q for qid, q in queries.items() if not q.params.repeat}


def _is_score(name: str, value: Any) -> bool:
    """A number worth a spread: not a flag, not a count of items."""
    return isinstance(value, int | float) and not isinstance(value, bool) and name != "n" and not name.startswith("n_")


def repeat_scores(bench: Aggregates, records: Sequence[Record], options: dict[str, Any],
                  n: int) -> list[dict[str, float]]:
    """The benchmark's headline numbers, aggregated on each repeat's records alone (repeats 0..n-1)."""
    by_repeat: dict[int, list[Record]] = defaultdict(list)
    for rec in records:
        by_repeat[rec.repeat].append(rec)
    out = []
    for r in range(n):
        metrics = bench.aggregate(by_repeat[r], options) if by_repeat[r] else {}
        out.append({name: float(v) for name, v in bench.headline(metrics) if _is_score(name, v)})
    return out


def spread(per_repeat: Sequence[Mapping[str, float]]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Mean and sample standard deviation of each score over the repeats that have it."""
    names = list(dict.fromkeys(k for scores in per_repeat for k in scores))
    pairs = {k: mean_sd([s[k] for s in per_repeat if k in s]) for k in names}
    return {k: m for k, (m, _) in pairs.items()}, {k: sd for k, (_, sd) in pairs.items()}


def by_query(records: Sequence[Record]) -> dict[str, list[Record]]:
    """Each query's records, in repeat order."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: r.repeat):
        groups[source_id(rec)].append(rec)
    return dict(groups)


def repeats_summary(bench: Aggregates, records: Sequence[Record], options: dict[str, Any], n: int,
                    n_queries: int) -> dict[str, Any]:
    """summary["repeats"]: `records` are every scored record of the run (all repeats), `n_queries` the
    queries of all repeats."""
    per_repeat = repeat_scores(bench, records, options, n)
    mean, sd = spread(per_repeat)
    groups = list(by_query(records).values())
    single_gold = all(len({r.gold for r in g}) == 1 and g[0].gold for g in groups)  # one gold per query
    return {
        "n": n,
        "headline_metric": bench.headline_for(options),
        "queries": n_queries,
        "missing": n_queries - len(records),
        "errors": sum(1 for r in records if r.error),
        "per_repeat": [{"repeat": r, "records": sum(1 for x in records if x.repeat == r), "scores": s}
                       for r, s in enumerate(per_repeat)],
        "mean": mean,
        "sd": sd,
        "agreement": agreement([r.parsed for r in g] for g in groups).to_dict(),
        "majority_vote_pct": majority_vote_pct([(r.parsed, r.correct is True) for r in g] for g in groups)
        if single_gold else None,
        "pass_at_k": {str(k): v for k, v in pass_at_ks([[r.correct is True for r in g] for g in groups], n).items()}
        if single_gold else None,
        "reliability": repeats_as_variants(groups, n),
    }


def repeats_as_variants(groups: Sequence[Sequence[Record]], n: int) -> dict[str, Any] | None:
    """The known/guess mixture (θ, r, g; metrics.reliability) with the n repeats of each query as its
    variants: a question the model knows comes back right in most repeats, a guess only by luck.
    Over the queries with every repeat answered; None when there are none, or fewer than the 3
    repeats the mixture needs to be identifiable."""
    counts = [sum(r.correct is True for r in g) for g in groups if len(g) == n]
    return fit_histogram(histogram(counts, n)).as_dict() if counts and n >= 3 else None


def add_repeats(summary: dict[str, Any], bench: Aggregates, records: Sequence[Record], options: dict[str, Any],
                n: int, n_queries: int) -> None:
    """With n > 1: summary["repeats"], and the run complete only when every repeat is; usage and cache
    counts cover every repeat (what was paid for), the scores and counts stay repeat 0's."""
    rep = repeats_summary(bench, records, options, n, n_queries)
    summary["repeats"] = rep
    summary["missing"] = rep["missing"]
    summary["complete"] = bool(summary["complete"]) and rep["missing"] == 0 and rep["errors"] == 0
    summary["usage"].update(usage_totals(records))
    summary["cache"] = {"hits": sum(1 for r in records if r.cached), "misses": sum(1 for r in records if not r.cached)}


def n_repeats(summary: Mapping[str, Any]) -> int:
    return int((summary.get("repeats") or {}).get("n") or 1)


class Compared(Aggregates, Protocol):
    """What `compare` needs of a benchmark over repeats: the repeat scores and the headline as observations."""

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None: ...


def over_repeats(bench: Compared, records: Sequence[Record], options: dict[str, Any], k: int,
                 of_run: int) -> tuple[OverRepeats, ScoreTable | None]:
    """One run in a comparison over its first k repeats (of `of_run`): each repeat's headline scores with
    their mean and sd (as summary["repeats"] computes them), and the headline's observations averaged
    over the k repeats (per-item mean correctness), paired with other runs by repeat 0's keys."""
    used = [r for r in records if r.repeat < k]
    per_repeat = repeat_scores(bench, used, options, k)
    mean, sd = spread(per_repeat)
    by_repeat: dict[int, list[Record]] = defaultdict(list)
    for rec in used:  # each repeat's records under repeat 0's ids, so its table pairs as repeat 0's does
        by_repeat[rec.repeat].append(replace(rec, query_id=source_id(rec), repeat=0))
    tables = [t for r in range(k) if by_repeat[r] and (t := bench.score_table(by_repeat[r], options)) and t.n]
    return OverRepeats(k, of_run, per_repeat, mean, sd), mean_over_repeats(tables) if tables else None


def compare_note(metric: str, counts: Mapping[str, int], spreads: Mapping[str, OverRepeats]) -> str | None:
    """What `compare` says about runs with these repeat counts (label -> N) and, over the k >= 2 repeats
    they share, each run's spread: which repeats are used, what the ranking and the tests rest on."""
    if all(n == 1 for n in counts.values()):
        return None
    k = min(counts.values())
    lead = f"repeats differ ({', '.join(f'{label}: {n}' for label, n in counts.items())})"
    if k < 2:
        return f"{lead}: compared on repeat 0, the one repeat they have in common (each run's headline)"
    if len(set(counts.values())) == 1:
        lead = f"every run has {k} repeats (0–{k - 1})"
    else:
        unused = "; ".join(f"{label}: {k}" + (f"–{n - 1}" if n - 1 > k else "")
                           for label, n in counts.items() if n > k)
        lead += f": compared on the {k} common repeats 0–{k - 1}; later repeats are not used ({unused})"
    shown = ", ".join(f"{label} {_num(s.mean.get(metric))} ± {_num(s.sd.get(metric))}"
                      for label, s in spreads.items())
    return (f"{lead}; {CommonRepeats(k, dict(counts)).method}; the paired test is {PAIRED_TEST}; "
            f"{metric} over the common repeats (mean ± sd across repeats): {shown}")


def _num(x: float | None) -> str:
    return "n/a" if x is None else json.dumps(round(x, 2))
