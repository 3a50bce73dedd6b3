"""`evalkit merge`: the run directories of one run's shards (`--shard K/N`) made into one ordinary run
directory, as if the unsharded command had run there.

Its config.json holds the *unsharded* identity (the shards' identity without `shard`), so the
unsharded command with `--out` that directory finds every answer and sends nothing, and compare,
view, report and export read it like any run. The records are regraded and summarised the way
`evalkit report` does (the same resume sorting, grading, summary and publishing: no second scorer),
one per query, in the unsharded run's query order, so the headline's bootstrap interval is the
unsharded run's too. A shard's records.jsonl may hold a query twice (a failure, then its answer; a
request asked again, as --reask-cutoffs does): the last answer counts, as on any resume.

Shards are files anyone can edit, and a merge is what gets published, so a shard is refused as
tampered (exit 2, nothing written; one line naming the file, the line and the query) when it holds
a record of a query that is not in the run's data (0.3 carried it into the merged records.jsonl), or
a second answer to the very same request (the same request key) that differs from the first, within
a shard or across shards (0.3 kept whichever line came last). The same answer twice (an honest
overlap) passes.

Shards run with `--until-ci` each stopped on their own interval: the merged run's "sample" block is
recomputed from their records over shard × category strata (multi/merge_sample.py), and a merge of
shards that all stopped so is a sample (exit 0, `stopped: "sample"`), not an incomplete run.

Refused (exit 2, nothing written): a directory that is not a shard, shards of different runs (the
differing identity fields named), a shard given twice, a shard missing (named; `partial` merges
what exists). A merge of an incomplete shard, or a partial one, is written, marked, and exits 1.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Runner
from evalkit.ask.store.cache import NullCache
from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.prepare import prepare
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.shard import Shard, parse_shard
from evalkit.core.text.shown import shown_text
from evalkit.core.types import Query
from evalkit.engine.evaluate import RunResult
from evalkit.engine.repeats import add_repeats, first_repeat, saved_repeats, with_repeats
from evalkit.engine.resume import OLDER_REQUESTS, KeyOnlyProvider, sort_records, spec_of_identity
from evalkit.engine.run_data import recorded_data
from evalkit.grading.grade import grade, summarize
from evalkit.images.pipeline import ImagePipeline
from evalkit.money.costs import cost_fields
from evalkit.money.pricing import Price
from evalkit.multi.merge_sample import ShardSample, merged_sample
from evalkit.report.outputs import publish
from evalkit.rundir.identity import saved_settings
from evalkit.rundir.layout import SUMMARY, RunDir
from evalkit.rundir.lock import hold_run_dir
from evalkit.rundir.provenance import MANIFEST, key_facts, manifest, write_manifest
from evalkit.rundir.records import read_records

LINT = "lint.json"


@dataclass(frozen=True)
class ShardRun:
    """One shard's run directory, as its files say."""

    path: Path
    shard: Shard
    saved: dict[str, Any]  # its config.json

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self.saved["identity"])

    def json(self, name: str) -> dict[str, Any]:
        """One of its JSON files (summary.json, manifest.json), or {} when absent or unreadable."""
        with contextlib.suppress(OSError, ValueError):
            found = json.loads((self.path / name).read_text(encoding="utf-8"))
            return found if isinstance(found, dict) else {}
        return {}


@dataclass(frozen=True)
class MergePlan:
    """What the shards make: the unsharded identity, N, the shards given (by K) and those missing."""

    identity: dict[str, Any]
    n: int
    shards: tuple[ShardRun, ...]  # sorted by K
    missing: tuple[int, ...]


def read_shard(path: Path) -> ShardRun:
    """A shard's run directory; anything else is a one-line error."""
    saved = RunDir(path).read_config()
    value = saved["identity"].get("shard")
    if not value:
        raise EvalkitError(f"{path} is not a shard (its run was not given --shard K/N); merge takes the run "
                           "directories of one run's shards")
    return ShardRun(Path(path), parse_shard(str(value), flag=f"{path}: shard"), saved)


def unsharded(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The identity of the run the shard is a part of: the same, without `shard`."""
    return {k: v for k, v in identity.items() if k != "shard"}


def plan_merge(shards: Sequence[ShardRun], *, partial: bool = False) -> MergePlan:
    """Check that the shards are parts of one run, each given once; pure (raises EvalkitError, exit 2)."""
    if not shards:
        raise EvalkitError("merge: no shard run directories given")
    first = shards[0]
    base = unsharded(first.identity)
    for other in shards[1:]:
        theirs = unsharded(other.identity)
        differ = sorted(k for k in set(base) | set(theirs) if base.get(k) != theirs.get(k))
        if differ:
            raise EvalkitError(f"{other.path} and {first.path} are shards of different runs (they differ in "
                               f"{', '.join(differ)})")
        if other.shard.n != first.shard.n:
            raise EvalkitError(f"{other.path} is shard {other.shard} and {first.path} shard {first.shard}: "
                               "shards of different splits (their N differs)")
    by_k: dict[int, ShardRun] = {}
    for s in shards:
        if s.shard.k in by_k:
            raise EvalkitError(f"shard {s.shard} given twice: {by_k[s.shard.k].path} and {s.path}")
        by_k[s.shard.k] = s
    n = first.shard.n
    missing = tuple(k for k in range(1, n + 1) if k not in by_k)
    if missing and not partial:
        raise EvalkitError(f"missing {_shard_list(missing, n)}: merge needs every shard's run directory "
                           f"(or --partial, to merge the {len(by_k)} given and mark the run incomplete)")
    return MergePlan(base, n, tuple(by_k[k] for k in sorted(by_k)), missing)


def _shard_list(ks: Iterable[int], n: int) -> str:
    ks = list(ks)
    return f"shard{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))} of {n}"


def pooled_records(earlier: Mapping[str, Record], shards: Iterable[Mapping[str, Record]]) -> dict[str, Record]:
    """One record per query: the out directory's own (a plain run resumed there, an earlier merge), then
    each shard's last record of it; an answer is never replaced by a failure."""
    pooled = dict(earlier)
    for records in shards:
        for qid, rec in records.items():
            if rec.error is None or qid not in pooled or pooled[qid].error is not None:
                pooled[qid] = rec
    return pooled


def shard_records(shards: Sequence[ShardRun], queries: Mapping[str, Query]) -> list[dict[str, Record]]:
    """Each shard's records (the last per query), read whole before anything is merged; a tampered shard
    is an EvalkitError naming the file, the line and the query (see the module docstring)."""
    answered: dict[tuple[str, str], tuple[Path, int, Record]] = {}  # (query id, request key) -> first answer
    out = []
    for s in shards:
        path = RunDir(s.path).records_path

        def check(line: int, record: Record, path: Path = path) -> None:
            qid = record.query_id
            if qid not in queries:
                raise EvalkitError(f"{path}: line {line}: query '{shown_text(qid)}' is not a query of this run's "
                                   "data: a tampered or foreign shard, refused (nothing written)")
            if record.error is not None:
                return
            first = answered.setdefault((qid, record.request_key), (path, line, record))
            if first[2].response != record.response:
                at = f"line {first[1]}" if first[0] == path else f"{first[0]} line {first[1]}"
                raise EvalkitError(f"{path}: line {line}: query '{shown_text(qid)}' answered "
                                   f"{shown_text(repr(record.response), 40)} for the same request that {at} answered "
                                   f"{shown_text(repr(first[2].response), 40)}: a tampered shard, refused "
                                   "(nothing written)")

        out.append(read_records(path, check).records)
    return out


def merge(run_dirs: Sequence[str | Path], out: str | Path, *, partial: bool = False, plots: bool = True,
          say: Callable[[str], None] | None = None) -> RunResult:
    """Merge the run directories of one run's shards into `out` (see the module docstring). `say`
    receives the notes as they come (the CLI prints them); they are in the result's messages too."""
    plan = plan_merge([read_shard(Path(d)) for d in run_dirs], partial=partial)
    out = Path(out)
    for s in plan.shards:
        if s.path.resolve() == out.resolve():
            raise EvalkitError(f"--out {out} is shard {s.shard}'s run directory; merge into another folder")
    fresh = not out.exists()
    try:
        with hold_run_dir(out, advice="wait for it to finish or choose another --out"):
            return _merge(plan, RunDir(out), plots, say or (lambda _m: None))
    except EvalkitError:
        if fresh:
            RunDir(out).remove_if_empty()
        raise


def _merge(plan: MergePlan, rundir: RunDir, plots: bool, say: Callable[[str], None]) -> RunResult:
    identity, first = plan.identity, plan.shards[0]
    config = {k: v for k, v in first.saved["config"].items() if k != "shard"}
    rundir.bind(identity, config, data=first.saved.get("data_fingerprint"))  # refuses a folder of another run
    settings = saved_settings({"identity": identity, "config": config})
    bench_opts = {**settings.bench_dict(), "data": _data_of(first, config)}
    bench, items, queries, *_ = prepare(str(identity["benchmark"]), bench_opts)  # the unsharded run's order
    repeats = saved_repeats(config, first.path / "config.json")
    queries = with_repeats(queries, repeats)
    by_id = {q.id: q for q in queries}
    pooled = pooled_records(rundir.load_records(), shard_records(plan.shards, by_id))
    mode = settings.config.mode
    with contextlib.closing(ImagePipeline()) as pipeline:
        keys = Runner(KeyOnlyProvider(spec_of_identity(identity)), limiter=Limiter(concurrency=1),  # type: ignore[arg-type]
                      cache=NullCache(), pipeline=pipeline)
        resume = sort_records(by_id, pooled, keys.keys_of)  # blocking (hashes images): merge is no event loop
    older = resume.keep_older(by_id)
    scored = {**resume.errors, **resume.unchecked, **resume.current}
    ordered = [grade(bench, by_id[qid], scored[qid], mode) for qid in by_id if qid in scored]
    rundir.rewrite_records(resume.final_lines(by_id, ordered))
    first_records, first_ids = first_repeat(ordered, by_id)
    summary = summarize(bench, first_records, model=str(identity["model"]), mode=mode, n_items=len(items),
                        n_queries=len(first_ids), options=bench_opts, config=config, judge=config.get("judge"),
                        queries=first_ids, not_in_run=len(resume.outside), unscored=resume.unscored(ordered))
    if repeats > 1:
        add_repeats(summary, bench, ordered, bench_opts, repeats, len(queries))
    if older:
        summary["requests"] = OLDER_REQUESTS
        summary["older_requests"] = {"queries": len(older)}
    _add_facts(summary, plan, rundir, ordered, config, bench.official_source)
    answered = {r.query_id for r in ordered if r.error is None}
    left = {s.shard.k: sum(1 for q in queries if s.shard.holds(q.item_id) and q.id not in answered)
            for s in plan.shards}
    summary["merge"] = {"shards": plan.n, "merged": [{"shard": str(s.shard), "run_dir": str(s.path),
                                                      "missing": left[s.shard.k]} for s in plan.shards],
                        "missing_shards": list(plan.missing),
                        "incomplete_shards": [k for k, n in left.items() if n]}
    sampled = _sample(summary, plan, bench, queries, ordered, bench_opts)
    messages = _notes(plan, {k: 0 if k in sampled else n for k, n in left.items()}, len(by_id) - len(answered))
    for m in messages:
        say(m)
    publish(rundir, summary, bench, first_records, bench_opts, figures=plots)
    done = summary["complete"] or (summary.get("stopped") == "sample" and not messages)
    return RunResult(summary, ordered, rundir.path, 0 if done else 1, messages)


def _sample(summary: dict[str, Any], plan: MergePlan, bench: Any, queries: Sequence[Query],
            ordered: Sequence[Record], options: Mapping[str, Any]) -> set[int]:
    """Shards that stopped on their own interval (--until-ci): the merged "sample" block recomputed
    from their records (multi/merge_sample.py); the shards (by K) that stopped so, whose unasked
    queries are the sample's design, not missing answers."""
    if plan.missing:  # a partial merge is incomplete, not a sample of the whole set
        return set()
    blocks = {s.shard.k: s.json(SUMMARY).get("sample") or None for s in plan.shards}
    block = merged_sample(bench, queries, {r.query_id: r for r in ordered},
                          [ShardSample(s.shard, blocks[s.shard.k]) for s in plan.shards], options)
    if block is None:
        return set()
    summary["sample"] = block
    stopped = {s.shard.k for s in plan.shards if blocks[s.shard.k] and s.json(SUMMARY).get("stopped") == "sample"}
    if len(stopped) == sum(1 for b in blocks.values() if b):
        summary["stopped"] = "sample"
    return stopped


def _data_of(shard: ShardRun, config: Mapping[str, Any]) -> Any:
    """The data to read again (for the run's query order and the grading): the path the shards recorded
    where it is, else its source as the run directory recorded it (a Hub source at its pinned commit), so
    a merge on another machine reads the same data."""
    path = config.get("data")
    if isinstance(path, str) and Path(path).exists():
        return path
    return recorded_data(shard.path, get_benchmark(str(shard.identity["benchmark"])).default_data) or path


def _add_facts(summary: dict[str, Any], plan: MergePlan, rundir: RunDir, records: Sequence[Record],
               config: Mapping[str, Any], official_source: str | None) -> None:
    """What a run adds beyond the scores: data_source, costs, provenance (manifest.json) and lint."""
    first = plan.shards[0]
    shard_summary = first.json(SUMMARY)
    summary["data_source"] = shard_summary.get("data_source") or config.get("data_source")
    price = Price(**config["price"]) if isinstance(config.get("price"), dict) else None
    summary["usage"].update(cost_fields(price, records))
    manifests = [s.json(MANIFEST) for s in plan.shards]
    servers: dict[str, Any] = {}
    for m in manifests:
        servers.update(m.get("servers") or {})
    data_source = next((m["data_source"] for m in manifests if m.get("data_source")), summary["data_source"])
    facts = write_manifest(rundir.path, manifest(records, identity=plan.identity, servers=servers,
                                                 official_source=official_source, data_source=data_source))
    summary["provenance"] = key_facts(facts)
    if isinstance(shard_summary.get("lint"), dict):  # every shard lints the whole data: the same findings
        summary["lint"] = shard_summary["lint"]
    if (first.path / LINT).is_file() and not (rundir.path / LINT).exists():
        shutil.copyfile(first.path / LINT, rundir.path / LINT)


def _notes(plan: MergePlan, left: Mapping[int, int], missing: int) -> list[str]:
    notes = [f"shard {k}/{plan.n} ({s.path}) is incomplete: {left[k]:,} of its queries have no answer; re-run its "
             "command (it resumes), then merge again" for k, s in ((s.shard.k, s) for s in plan.shards) if left[k]]
    if plan.missing:
        notes.append(f"--partial: {_shard_list(plan.missing, plan.n)} missing; merged the {len(plan.shards)} "
                     f"given, {missing:,} queries unanswered: the run is incomplete")
    return notes
