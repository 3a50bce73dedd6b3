"""`evalkit report RUN_DIR`: re-score a finished (or interrupted) run from its records.

The model is never asked again; with --judge, unparsed answers go to the judge model
through the runner and the same cache, and records.jsonl is rewritten with the verdicts.
The run directory is locked as a run locks it (lock.py): a report never writes beside a run.
Data that changed since the answers were given (the data fingerprint `evalkit run` computes,
location.data_of, differs from the one in the run's identity) is refused as `run` refuses it, in
one line naming what changed: re-running the run's command with --reask-changed asks the changed
queries again (a corrected gold answer is re-graded without asking). Otherwise records are sorted
as a resume sorts them (resume.py): an answer to a request that has changed since is left out of
the scores, and records of queries no longer in the data are kept, not scored.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.store.cache import NullCache, ResponseCache
from evalkit.ask.store.seal import CacheSeal
from evalkit.benchmarks.prepare import Prepared, prepare
from evalkit.core.record import Record
from evalkit.core.settings import RunConfig
from evalkit.core.types import Query
from evalkit.engine.location import FILE_HASHES, data_of
from evalkit.engine.repeats import add_repeats, first_repeat, saved_repeats, with_repeats
from evalkit.engine.resume import (
    OLDER_REQUESTS,
    KeyOnlyProvider,
    may_hold_unmarked_v010,
    sort_records_off_loop,
    spec_of_identity,
)
from evalkit.engine.run_data import index_places
from evalkit.engine.until.ci import UntilCI
from evalkit.engine.until.value import GroupScore, Tables
from evalkit.grading.grade import grade, judge_records, summarize
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.fit_store import fits_kept_in
from evalkit.money.costs import cost_fields
from evalkit.providers import api_key_for, create_provider, parse_spec
from evalkit.providers.preflight import check_setup
from evalkit.report.outputs import publish
from evalkit.rundir.identity import is_legacy, saved_settings
from evalkit.rundir.layout import RunDir, other_data
from evalkit.rundir.lock import hold_run_dir
from evalkit.rundir.records import DamagedLine, damaged_note
from evalkit.rundir.rows import price_in


async def rereport(run_dir: Path, *, judge: str | None = None, judge_base_url: str | None = None,
                   cache_dir: str | None = None, env: dict[str, str] | None = None,
                   console: Console | None = None) -> dict[str, Any]:
    RunDir(run_dir).read_config()  # not a run directory: say so, and create nothing
    with hold_run_dir(Path(run_dir), advice="wait for it to finish"):
        return await _rereport(Path(run_dir), judge, judge_base_url, cache_dir,
                               env if env is not None else dict(os.environ), console or Console(stderr=True))


async def _rereport(run_dir: Path, judge: str | None, judge_base_url: str | None, cache_dir: str | None,
                    env: dict[str, str], console: Console) -> dict[str, Any]:
    rundir = RunDir(run_dir)
    saved = rundir.read_config()
    identity, config = saved["identity"], saved["config"]
    judge_spec = parse_spec(judge, tuple((judge_base_url or "").replace(",", " ").split()), env) if judge else None
    if judge_spec:
        check_setup(judge_spec, "--judge")
        api_key_for(judge_spec, env, flag="--judge")
    settings = saved_settings(saved)
    bench_opts = settings.bench_dict()
    # a local data file's saved index, as the run left it in its cache folder: the file is not read again
    index_dir, index_also = index_places(run_dir, cache_dir, env)
    prepared = prepare(identity["benchmark"], bench_opts, index_dir=index_dir, index_also=index_also)
    bench, items, queries = prepared.bench, prepared.items, prepared.queries
    _check_data(run_dir, saved, prepared, settings.config.images, Path(_cache_path(cache_dir, env)))
    repeats = saved_repeats(config, run_dir / "config.json")  # --repeats N: the run's queries are N times these
    queries = with_repeats(queries, repeats)
    by_id = {q.id: q for q in queries}
    existing = rundir.load_records()
    damaged = list(rundir.damaged)
    mode = settings.config.mode
    async with contextlib.AsyncExitStack() as stack:
        pipeline = stack.enter_context(contextlib.closing(ImagePipeline()))
        if prepared.index is not None:  # the request keys' image hashes, kept with the index: no image read
            pipeline.know_span_hashes(prepared.index.image_hashes)
        provider: Any = KeyOnlyProvider(spec_of_identity(identity))  # keys only: never asked
        keys = Runner(provider, limiter=Limiter(concurrency=1), cache=NullCache(), pipeline=pipeline)
        resume = await sort_records_off_loop(by_id, existing, keys.keys_of)
        v010_dir = may_hold_unmarked_v010(run_dir, v010_config=is_legacy(identity), records=existing.values())
        older = resume.keep_older(by_id, v010_dir=v010_dir)  # 0.1.0's answers to the same questions: graded
        # an answer whose key cannot be checked now (an image gone since) is scored as the run scored it
        scored = {**resume.errors, **resume.unchecked, **resume.current}
        ordered = [grade(bench, by_id[qid], scored[qid], mode) for qid in by_id if qid in scored]
        if judge_spec:
            cache = stack.enter_context(contextlib.closing(ResponseCache(Path(_cache_path(cache_dir, env)),
                                                                         CacheSeal.from_env(env))))
            judge_provider = create_provider(judge_spec, env)
            stack.push_async_callback(judge_provider.close)
            concurrency = int(config.get("concurrency") or 32)
            runner = Runner(judge_provider, limiter=Limiter(concurrency=concurrency), cache=cache, pipeline=pipeline,
                            policy=RetryPolicy(), fingerprints=False)
            await judge_records(bench, by_id, ordered, runner, workers=concurrency, mode=mode)
            config = {**config, "judge": judge_spec.label}
    for message in _notes(damaged, len(resume.changed)):
        console.print(f"evalkit: {message}", markup=False, highlight=False, soft_wrap=True)
    rundir.rewrite_records(resume.final_lines(by_id, ordered))  # damaged lines go to records.damaged.jsonl
    first, first_ids = first_repeat(ordered, by_id)  # the scores are repeat 0's
    with fits_kept_in(rundir.path):  # the reliability fits of unchanged records are not computed again
        summary = summarize(bench, first, model=identity["model"], mode=mode, n_items=len(items),
                            n_queries=len(first_ids), options=bench_opts, config=config,
                            judge=judge_spec.label if judge_spec else config.get("judge"), queries=first_ids,
                            not_in_run=len(resume.outside), unscored=resume.unscored(ordered))
        if repeats > 1:
            add_repeats(summary, bench, ordered, bench_opts, repeats, len(queries))
        if older:
            summary["requests"] = OLDER_REQUESTS
            summary["older_requests"] = {"queries": len(older)}
        _keep_run_facts(summary, rundir, config, ordered)
        _keep_sample(summary, rundir, queries, bench, bench_opts, ordered)
        publish(rundir, summary, bench, first, bench_opts)
    return summary


def _keep_run_facts(summary: dict[str, Any], rundir: RunDir, config: dict[str, Any], ordered: list[Record]) -> None:
    """What the run found and paid stands: its lint, and `this_run` (a report asks the model nothing). The
    costs are computed again from the records at the price the run recorded (config.json), as the run
    computed them: a report never turns a run's cost into null."""
    summary["usage"].update(cost_fields(price_in(config), ordered))
    with contextlib.suppress(Exception):
        before = rundir.read_summary()
        if isinstance(lint := before.get("lint"), dict):  # what the run found in its data (lint.json)
            summary["lint"] = lint
        if isinstance(this_run := before.get("this_run"), dict):
            summary["this_run"] = this_run


def _keep_sample(summary: dict[str, Any], rundir: RunDir, queries: list[Query], bench: Tables,
                 bench_opts: dict[str, Any], ordered: list[Record]) -> None:
    """A sampled run (--until-ci) stays one: its block recomputed from the records, its bets replayed as the
    run's summary.json recorded them (a re-graded answer moves the interval as it would have in the run)."""
    with contextlib.suppress(Exception):
        before = rundir.read_summary()
        block = before.get("sample")
        if not isinstance(block, dict):
            return
        if block.get("rule") != "until-ci" or "shards" in block:  # a merge's (shard x category strata: multi/
            summary["sample"] = block  # merge_sample.py) or a matrix's: kept as written, never shown as whole
            if before.get("stopped") == "sample" and not summary.get("stopped"):
                summary["stopped"], summary["complete"] = "sample", False
            return
        target = block.get("target")
        rule = UntilCI(queries, GroupScore(bench, bench_opts), seed=int(block.get("seed") or 0), previous=block,
                       width=float(target) if isinstance(target, (int, float)) else None)
        for rec in ordered:
            rule.observe(rec)
        again = rule.block()
        if again is not None:
            summary["sample"] = again
            if before.get("stopped") == "sample" and rule.done() and not summary.get("stopped"):
                summary["stopped"], summary["complete"] = "sample", False


def _check_data(run_dir: Path, saved: dict[str, Any], prepared: Prepared, images: str | None,
                cache: Path) -> None:
    """Refuse, as `evalkit run` does, to grade answers given to other data than today's. Not checked:
    a 0.1.0 identity (it holds no fingerprint), and a Hub or archive source (pinned to a commit and
    checked against its sums when fetched; a run read only some files of its folder, which the
    report, reading the folder, cannot tell). The cache folder's file hashes spare re-reading
    unchanged files, as in a run."""
    then = saved["identity"].get("data_sha256")
    source = saved.get("config", {}).get("data_source")
    if not isinstance(then, str) or (isinstance(source, dict) and source.get("kind") in ("hub", "archive")):
        return
    now, _ = data_of(prepared, images, cache / FILE_HASHES if cache.is_dir() else None)
    if now.sha256 != then:
        raise other_data(run_dir, saved.get("data_fingerprint"), now.to_dict(),
                         f"re-run the run's command with --out {run_dir} --reask-changed to ask the changed "
                         "queries again (a corrected gold answer is re-graded without asking), then report it")


def _notes(damaged: list[DamagedLine], changed: int) -> list[str]:
    notes = []
    if damaged:
        notes.append(damaged_note(damaged, saved=True, then="re-run the run's command to ask their queries again"))
    if changed:
        notes.append(f"{changed} answers were given to questions that have changed since (question, images or "
                     "prompt); left out of the scores until the run's command is re-run")
    return notes


def _cache_path(cache_dir: str | None, env: dict[str, str]) -> str:
    return RunConfig(cache_dir=cache_dir).cache_path(env)
