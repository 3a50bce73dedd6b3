"""`--until-decided`: a benchmark's models asked in one seeded order until every pair of them is decided.

A matrix gives each benchmark one `Decider`, shared by that benchmark's model runs; each run's stop
rule (`DecidingRule`, through the engine's `stop_rule` hook) is a view onto it. Why one object: a
pair's evidence is the items *both* models answered, so no run can decide alone.

- One order: every model asks the groups in the seeded random order (engine/until/order.py).
- A group counts for a pair once both models have it, in the order's sequence only: each model's
  *answered prefix* of the sequence (a group joins once every one of its queries has a record; an
  error counts as wrong), and a pair is fed up to the shorter of its two prefixes. Groups answered
  beyond a prefix wait for the gap to fill. The order is fixed before any answer is seen, which is
  what the anytime test needs (metrics/analysis/sequential_pairs.py).
- A group's value is the headline's per-group score in [0, 1] (engine/until/value.py: a mean over
  repeats or variants is a fraction; the paired test takes fractions, docs/stopping.md).
- A pair is decided when Holm over every pair's anytime p-value rejects at α ("test"), or, with
  `--width W`, when its difference's 95 % interval is at most ±W points ("width"). Decisions are
  looked at when a run asks whether it is done (before each new query), so the looks are the
  engine's; anytime p-values only fall, so a pair Holm rejected stays rejected.
- A model is done once every pair it is in is decided, or can get no more items (the other model's
  run has ended and the pair has all it answered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.core.errors import EvalkitError
from evalkit.metrics.analysis.sequential_pairs import PairState, holm

if TYPE_CHECKING:
    from evalkit.core.record import Record
    from evalkit.core.types import Query
    from evalkit.engine.job import Job
    from evalkit.engine.until.ci import UntilCI

RULE = "until-decided"
ALPHA = 0.05


@dataclass
class PairVerdict:
    """One pair's evidence and decision: "test" (Holm rejected), "width" (interval ±W or narrower) or None."""

    a: str
    b: str
    state: PairState = field(default_factory=PairState)
    decided: str | None = None
    at: int | None = None  # paired items when it was decided

    def half_width(self, alpha: float = ALPHA) -> float:
        lo, hi = self.state.interval(alpha)
        return (hi - lo) / 2

    def to_dict(self, alpha: float = ALPHA) -> dict[str, Any]:
        """In points (the difference p_A - p_B and its interval, x 100)."""
        lo, hi = self.state.interval(alpha)
        return {"a": self.a, "b": self.b, "items": self.state.n, "decided": self.decided, "at": self.at,
                "difference": round(self.state.difference() * 100, 4),
                "interval": [round(lo * 100, 4), round(hi * 100, 4)], "p_value": round(self.state.p_value(), 6)}


class Decider:
    """The until-decided controller of one benchmark: the models' answered prefixes, a `PairState` per
    pair, and the decisions. `width` in points; None: decided by the test alone."""

    def __init__(self, models: Sequence[str], *, width: float | None = None, alpha: float = ALPHA) -> None:
        if len(models) < 2:
            raise EvalkitError("--until-decided compares models: give two or more (--model A --model B)")
        if len(set(models)) != len(models):
            raise EvalkitError(f"--until-decided: models named twice ({', '.join(models)})")
        self.models = list(models)
        self.width = None if width is None else width / 100.0
        self.alpha = alpha
        self.sequence: tuple[str, ...] | None = None
        self._place: dict[str, int] = {}
        self._values: dict[str, dict[int, float]] = {m: {} for m in self.models}
        self.prefix: dict[str, int] = dict.fromkeys(self.models, 0)
        self.pairs: dict[tuple[str, str], PairVerdict] = {(a, b): PairVerdict(a, b) for a, b in
                                                         combinations(self.models, 2)}
        self._fed: dict[tuple[str, str], int] = dict.fromkeys(self.pairs, 0)
        self._finished: set[str] = set()
        self._dirty = False
        self.rules: dict[str, DecidingRule] = {}

    # ---- the order every model follows ----
    def set_sequence(self, sequence: Sequence[str], model: str = "") -> None:
        """The groups in the order all models ask them; every model's run must have the same groups."""
        seq = tuple(sequence)
        if self.sequence is None:
            self.sequence = seq
            self._place = {g: i for i, g in enumerate(seq)}
        elif seq != self.sequence:
            theirs = next(iter(self.rules), "") or "the others"
            what = "in another order (another --sample-seed)" if set(seq) == set(self.sequence) else \
                f"not the same set: {len(seq):,} and {len(self.sequence):,} items"
            raise EvalkitError(f"--until-decided: {model or 'a model'}'s run is not on the same items as {theirs} "
                               f"({what})")

    # ---- answers ----
    def answered(self, model: str, group: str, value: float) -> None:
        """One model's complete group and its value in [0, 1]; later answers to the same group change nothing."""
        pos = self._place.get(group)
        values = self._values[model]
        if pos is None or pos in values:
            return
        values[pos] = min(1.0, max(0.0, float(value)))
        p = self.prefix[model]
        if pos != p:
            return  # beyond the prefix: it waits for the gap before it
        while p in values:
            p += 1
        self.prefix[model] = p
        for key in self.pairs:
            if model in key:
                self._feed(key)

    def _feed(self, key: tuple[str, str]) -> None:
        a, b = key
        upto = min(self.prefix[a], self.prefix[b])
        state, va, vb = self.pairs[key].state, self._values[a], self._values[b]
        i = self._fed[key]
        while i < upto:
            state.update(va[i], vb[i])
            i += 1
        if i != self._fed[key]:
            self._fed[key] = i
            self._dirty = True

    def recall(self, block: Mapping[str, Any] | None) -> None:
        """The decisions a run's last "sample" block recorded (the same command again, or a continuation):
        a pair decided stays decided, at the items it was decided at. Its evidence only grows (the same
        records in the same order), so a rejection stays one; a width decision is kept only under a width
        at least as wide. A block of another order (seed) or another rule is not read."""
        if not isinstance(block, Mapping) or block.get("rule") != RULE:
            return
        was = block.get("width")
        keep_width = self.width is not None and isinstance(was, (int, float)) and was / 100.0 <= self.width + 1e-12
        for entry in block.get("pairs") or ():
            try:
                v = self.pairs.get((entry["a"], entry["b"]))
                decided, at = entry.get("decided"), int(entry["at"]) if entry.get("at") is not None else None
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            if v is None or v.decided is not None or at is None:
                continue
            if decided == "test" or (decided == "width" and keep_width):
                v.decided, v.at = decided, at

    def finish(self, model: str) -> None:
        """The model's run has ended (done, whole, or stopped): its pairs get no more of its items."""
        self._finished.add(model)

    # ---- decisions ----
    def look(self) -> None:
        """Decide what the evidence now decides: Holm over every pair's anytime p-value, then the width."""
        if not self._dirty:
            return
        self._dirty = False
        verdicts = list(self.pairs.values())
        p = [v.state.p_value() for v in verdicts]
        rejected = holm(p, self.alpha) if min(p) <= self.alpha / len(p) else [False] * len(p)
        for v, r in zip(verdicts, rejected, strict=True):
            if v.decided is not None:
                continue
            if r:
                v.decided, v.at = "test", v.state.n
            elif self.width is not None and v.state.n and v.half_width(self.alpha) <= self.width + 1e-12:
                v.decided, v.at = "width", v.state.n

    def settled(self, key: tuple[str, str]) -> bool:
        """Decided, or no more items can come: a model of the pair has ended and the pair has all it answered."""
        v = self.pairs[key]
        if v.decided is not None:
            return True
        return any(m in self._finished and self._fed[key] >= self.prefix[m] for m in key)

    def done(self, model: str) -> bool:
        """Every pair the model is in is settled: it needs no new item."""
        self.look()
        return all(self.settled(key) for key in self.pairs if model in key)

    def verdicts(self) -> list[PairVerdict]:
        self.look()
        return list(self.pairs.values())

    def verdicts_of(self, model: str) -> list[PairVerdict]:
        return [v for v in self.verdicts() if model in (v.a, v.b)]

    def entries(self, model: str | None = None) -> list[dict[str, Any]]:
        """The pairs (the model's, or all) as summary.json's block and the comparison read them: in points,
        each named by its two run directories too (`runs`), with the set's size (`of`)."""
        runs = {name: rule.run for name, rule in self.rules.items()}
        of = len(self.sequence or ())
        return [{**v.to_dict(self.alpha), "runs": [runs.get(v.a), runs.get(v.b)], "of": of}
                for v in (self.verdicts() if model is None else self.verdicts_of(model))]

    # ---- the runs' rules ----
    def hook(self, model: str) -> Callable[[Job], DecidingRule]:
        """The engine's `stop_rule` hook for this model's run."""

        def make(job: Job) -> DecidingRule:
            from evalkit.engine.until.ci import UntilCI, previous_block
            from evalkit.engine.until.value import GroupScore

            queries = job.prepared.queries
            score = GroupScore(job.prepared.bench, job.s.bench_dict())
            seed = job.s.config.sample_seed
            own = UntilCI(queries, score, width=None, seed=seed)
            rule = DecidingRule(self, model, queries, own, job.where.rundir.path.name)
            self.rules[model] = rule
            previous = previous_block(job.where.rundir.path)
            if previous is not None and previous.get("seed") == seed:
                self.recall(previous)
            return rule

        return make


class DecidingRule:
    """One model's run's stop rule (engine/until/rule.py's StopRule), a view onto its benchmark's Decider.

    Its own interval (summary.json's "sample" block, as `--until-ci` gives it) comes from an untuned
    `UntilCI` over the same order; the block adds the pairs the model is in."""

    def __init__(self, decider: Decider, model: str, queries: Sequence[Query], own: UntilCI, run: str) -> None:
        self.decider, self.model, self.own, self.run = decider, model, own, run
        decider.set_sequence(own.sampled.sequence, model)
        self._group_of = {q.id: q.base_id for q in queries}
        self._members: dict[str, int] = {}
        for q in queries:
            self._members[q.base_id] = self._members.get(q.base_id, 0) + 1
        self._pending: dict[str, dict[str, Record]] = {}  # group -> its records so far
        self._complete: set[str] = set()

    def order(self, queries: Sequence[Query]) -> list[Query]:
        return self.own.order(queries)

    def observe(self, record: Record) -> None:
        self.own.observe(record)
        group = self._group_of.get(record.query_id)
        if group is None or group in self._complete:
            return
        records = self._pending.setdefault(group, {})
        records[record.query_id] = record
        if len(records) == self._members[group]:
            del self._pending[group]
            self._complete.add(group)
            self.decider.answered(self.model, group, self.own.value(list(records.values())))

    def done(self) -> bool:
        return self.decider.done(self.model)

    def block(self) -> dict[str, Any] | None:
        block = self.own.block()
        if block is None:
            return None
        pairs = [{k: v for k, v in e.items() if k != "of"} for e in self.decider.entries(self.model)]
        width = self.decider.width
        return {**block, "rule": RULE, "target": None, "width": None if width is None else round(width * 100, 6),
                "model": self.model, "pairs": pairs}


class _Planned(Protocol):
    bench: str
    shown: str
    options: dict[str, Any]


def deciders_for(pairs: Sequence[_Planned], options: Mapping[str, Any]) -> dict[str, Decider]:
    """A matrix's controllers, one per benchmark, with `until_decided`; refused in one line: one model,
    `--limit` (the sample is the rule's to choose) or `--until-ci` (one rule per run)."""
    if not options.get("until_decided"):
        return {}
    if options.get("limit") is not None or any(p.options.get("limit") is not None for p in pairs):
        raise EvalkitError("--limit and --until-decided cannot go together: --until-decided asks a seeded random "
                           "order of the whole set and stops once every pair is decided (drop --limit)")
    if options.get("until_ci") is not None:
        raise EvalkitError("--until-ci and --until-decided cannot go together: --until-decided stops on the pairs "
                           "(add --width W to decide a pair once its difference is known to ±W points)")
    by_bench: dict[str, list[str]] = {}
    for p in pairs:
        by_bench.setdefault(p.bench, []).append(p.shown)
    for bench, models in by_bench.items():
        if len(models) < 2:
            raise EvalkitError(f"--until-decided compares models: {bench} has one ({models[0]}); give two or more "
                               "--model (for one run's interval, --until-ci W)")
    return {bench: Decider(models, width=options.get("width")) for bench, models in by_bench.items()}
