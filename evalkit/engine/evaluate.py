"""One run, end to end: load -> expand -> ask -> parse -> (judge) -> aggregate -> write.

`run()` is the Python API; the CLI is a thin layer over it. Re-running with the same settings
resumes in the same run directory (location.py) and sends only what is missing, or was asked differently
(resume.py). One process at a time works in a run directory (lock.py). Every resource a run
opens (providers, cache, image pipeline and its threads, the records file) is owned by one
AsyncExitStack, so an error anywhere closes all of them and keeps every answer received.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.ask.batch_journal import JOURNAL, BatchJournal
from evalkit.ask.batch_pool import BatchPool
from evalkit.ask.runner import Runner
from evalkit.ask.schedule import group_by_image, image_group
from evalkit.benchmarks.prepare import Prepared
from evalkit.benchmarks.run_settings import RunSettings, resolve_settings
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.shard import items_in
from evalkit.core.types import GenParams, Outcome, Record
from evalkit.data.source import data_headline, describe
from evalkit.engine.batching import batch_notes, batch_summary, fallback_live, waiting_workers
from evalkit.engine.budgeting import check_budget_flags, open_budget, start_line, stop_line
from evalkit.engine.cutoffs import reask_note, split_options, to_reask, with_budget
from evalkit.engine.data_errors import closing_line
from evalkit.engine.dry_run import dry_run, scaled_from_sample
from evalkit.engine.gate import Preflight
from evalkit.engine.in_thread import run_blocking
from evalkit.engine.location import Located, forget_created, locate, locate_cut_off_run
from evalkit.engine.lock import hold_run_dir
from evalkit.engine.provenance import run_facts
from evalkit.engine.records_read import damaged_note
from evalkit.engine.repeats import add_repeats, first_repeat, mark, with_repeats
from evalkit.engine.result import RunResult
from evalkit.engine.resume import OLDER_REQUESTS, may_hold_unmarked_v010, sort_records_off_loop
from evalkit.engine.run_data import download_plan, prepare_data, prepare_sample, with_files
from evalkit.engine.shutdown import on_signals
from evalkit.engine.wiring import make_runner, open_cache, specs_for
from evalkit.engine.write_stop import WriteStop, WriteStopped
from evalkit.grading.grade import grade, judge_records, make_record, summarize
from evalkit.images.pipeline import ImagePipeline
from evalkit.lint import LintSummary, lint_at_start
from evalkit.money.costs import CostMeter, DryRunPlan, plan_dry_run, records_cost
from evalkit.money.pricing import Price, load_prices
from evalkit.providers import (
    BATCH_PROVIDERS,
    ProviderSpec,
)
from evalkit.providers.registry import info
from evalkit.report.outputs import draw_plots, publish
from evalkit.report.progress import RunProgress

DRAIN_S = 10.0  # after Ctrl-C/SIGTERM, how long replies already on their way may take to arrive


def run(bench: str, model: str, **options: Any) -> RunResult:
    """Evaluate `model` (e.g. "openai/gpt-4o") on benchmark `bench`; see `evalkit run BENCH --help` for
    the options (the keyword names are the flags' names with underscores). An unknown or wrong-typed
    option is an error naming it, raised before anything is written. `progress=False`: no progress
    line; `quiet=True`: nothing printed at all (the lines said are in RunResult.messages).

    Inside a running event loop (a notebook cell) the run goes on a worker thread with its own loop
    (engine/in_thread.py); interrupting the cell stops it as Ctrl-C does. `await run_async(...)` runs
    it on the caller's loop instead."""
    return run_blocking(lambda: run_async(bench, model, **options))


@dataclass(frozen=True)
class _Job:
    """One run, resolved: what `_evaluate` needs once the run directory is locked."""

    s: RunSettings
    spec: ProviderSpec
    judge_spec: ProviderSpec | None
    prepared: Prepared
    price: Price | None
    where: Located
    config: dict[str, Any]
    env: Mapping[str, str]
    console: Console
    lint: LintSummary
    cutoff_budget: int | None = None  # --reask-cutoffs: the budget cut-off answers are asked again with


async def run_async(bench_name: str, model: str, **options: Any) -> RunResult:
    s = resolve_settings(bench_name, model, options)
    options, cutoff_budget = split_options(options)
    if cutoff_budget is not None:  # its --max-tokens is the cut-offs' budget: the run is the one without it
        s = resolve_settings(bench_name, model, options)
    cfg = s.config
    env: Mapping[str, str] = s.hooks.get("env") or os.environ
    if cfg.api_version:  # the flag wins over the variable, for the model, its judge and its batches alike
        env = {**env, "OPENAI_API_VERSION": cfg.api_version}
    quiet = bool(s.hooks.get("quiet"))
    if quiet:  # no progress line, no download bar
        s = replace(s, config=replace(cfg, progress=False))
        cfg = s.config
    console: Console = Console(stderr=True, quiet=True) if quiet else s.hooks.get("console") or Console(stderr=True)
    check_budget_flags(cfg, env)
    spec, judge_spec = await specs_for(cfg, env)
    plan = download_plan(s, env) if cfg.dry_run else None
    if plan is not None:  # priced before anything is downloaded: the listing's sizes, the published count
        if plan.get("questions"):
            price = load_prices(Path(cfg.prices) if cfg.prices else None).price_for(spec.provider, spec.model)
            sample = prepare_sample(s, env)
            n_items = min(plan["questions"], cfg.limit or plan["questions"])
            estimate = await scaled_from_sample(sample.queries, len(sample.items), n_items, spec, env, cfg, price)
            plan = {**plan, **estimate, "notes": plan["notes"] + estimate["notes"]}
        return RunResult({"benchmark": bench_name, "model": spec.label, "dry_run": plan}, [], Path(cfg.out or "runs"), 0)
    with read_caps.using(cfg.max_line_mb, cfg.max_image_mb):  # no data line or image read past its cap
        prepared = prepare_data(s, spec, env, lambda line: console.print(f"evalkit: {line}", markup=False,
                                                                         highlight=False, soft_wrap=True))
    prepared = prepared._replace(queries=with_repeats(prepared.queries, cfg.repeats, spec.provider if cfg.batch else None))
    queries = prepared.queries
    price = load_prices(Path(cfg.prices) if cfg.prices else None).price_for(spec.provider, spec.model)
    if cfg.max_cost is not None and price is None and not info(spec.provider).reports_cost:
        raise EvalkitError(f"--max-cost needs a price for {spec.label}; none is known (add one with --prices FILE)")
    where = locate(s, spec, prepared, env)  # (saves the data's file hashes in the cache folder)
    if cutoff_budget is not None:  # the run that was cut off, with its own max_tokens
        where, queries = locate_cut_off_run(where, queries, cutoff_budget)
        prepared = prepared._replace(queries=queries)
    lint_cache = None if cfg.no_cache or cfg.dry_run else Path(cfg.cache_path(env))  # a dry run writes nothing
    with read_caps.using(cfg.max_line_mb, cfg.max_image_mb):
        lint = lint_at_start(prepared.bench, prepared.items, prepared.data, lint_cache)
    if cfg.strict and lint.errors:
        raise EvalkitError(f"{lint.line}; --strict: the run is not started (`evalkit lint {bench_name} --data "
                           f"{prepared.data}` lists them)")
    source = with_files(prepared, where.known)
    prepared = prepared._replace(source=source)
    config = {**where.identity, "data": str(prepared.data), "data_source": source.to_dict(files=False),
              "images": cfg.images, "judge": cfg.judge,
              "concurrency": cfg.concurrency, "rpm": cfg.rpm, "tpm": cfg.tpm, "timeout_s": cfg.timeout,
              "max_attempts": cfg.max_attempts, "group_images": cfg.group_images,
              "price": price.__dict__ if price else None, "options": s.options_dict(),
              **({"repeats": cfg.repeats} if cfg.repeats > 1 else {}),
              "generation": queries[0].params.to_dict() if queries else GenParams().to_dict()}
    if cfg.dry_run:
        summary = await dry_run(where.rundir, queries, spec, env, cfg, price, prepared.bench.name, config)
        summary["dry_run"]["data"] = describe(source, len(prepared.items))
        if cfg.limit and source.kind in ("hub", "archive"):
            summary["dry_run"].setdefault("notes", []).append(
                "--limit asks fewer questions but does not shrink the download: the whole set is fetched once")
        return RunResult(summary, [], where.rundir.path, 0)
    fresh = not where.rundir.path.exists()
    try:
        with hold_run_dir(where.rundir.path):  # one process per run directory, until its last write
            return await _evaluate(_Job(s, spec, judge_spec, prepared, price, where, config, env, console,
                                        lint, cutoff_budget))
    except EvalkitError as e:
        # e.g. the endpoint cannot be reached: a run that received nothing leaves nothing, not even the
        # folders it made (one stopped by a full disk did receive: the cache may hold its answers)
        if fresh and not isinstance(e, WriteStopped) and where.rundir.remove_if_empty():
            forget_created(where.created)
        raise


async def _evaluate(job: _Job) -> RunResult:
    s, cfg, spec, config, console = job.s, job.s.config, job.spec, job.config, job.console
    bench, items, queries = job.prepared.bench, job.prepared.items, job.prepared.queries
    rundir, identity = job.where.rundir, job.where.identity
    rundir.immediate = cfg.no_cache  # --no-cache: nothing else keeps an answer; write each record as it arrives
    messages: list[str] = []

    def tell(message: str | None) -> None:  # said as the run goes, not again with the results
        if message:
            console.print(f"evalkit: {message}", markup=False, highlight=False, soft_wrap=True)

    def say(message: str | None) -> None:  # said now and again after the results (RunResult.messages)
        if message:
            messages.append(message)
            tell(message)

    bound = rundir.bind(identity, config, legacy=job.where.legacy, data=job.where.data.to_dict(),
                        reask_changed=cfg.reask_changed)
    say(data_headline(job.prepared.source, len(items)))  # first: a score on the sample is not the benchmark's
    say(job.where.note or bound)
    if cfg.shard:
        say(f"shard {cfg.shard}: {items_in(cfg.shard, items):,} of {len(items):,} items ({len(queries):,} queries); "
            "`evalkit merge` joins the shards into one run")
    job.lint.write(rundir.path)
    if job.lint.counts.get("error") or job.lint.counts.get("warning"):  # info stays in lint.json
        tell(job.lint.line)  # summary["lint"] keeps it; lint.json has every finding
    by_id = {q.id: q for q in queries}
    existing = rundir.load_records()
    damaged = list(rundir.damaged)
    records: dict[str, Record] = {}
    fresh: set[str] = set()
    meter = CostMeter(job.price)
    on_record: Callable[[], None] | None = s.hooks.get("on_record")  # for tests and embedding tools

    async with contextlib.AsyncExitStack() as stack:
        cache = stack.enter_context(open_cache(cfg, job.env, say))
        budget = open_budget(stack, cfg, job.env, job.price, spec.provider, existing.values())

        def over_budget() -> bool:
            return budget is not None and budget.over(meter.spent_usd)

        if budget is not None:
            say(start_line(budget))
        pipeline = stack.enter_context(contextlib.closing(ImagePipeline(
            max_image_bytes=int(cfg.max_image_mb * read_caps.MB))))
        pipeline.note = say  # an image over Pillow's decompression-bomb limit is named on the console
        stack.callback(rundir.close)  # flushes records received so far, whatever happens next
        draining: list[int] = []

        def drain() -> None:  # the first Ctrl-C/SIGTERM: no new request; replies on their way are kept
            draining.append(1)
            console.print(f"evalkit: interrupted: receiving the replies already on their way (up to {DRAIN_S:g} s; "
                          "interrupt again to stop at once)", markup=False, highlight=False)

        # SIGINT/SIGTERM: flush, drain, then KeyboardInterrupt (exit 130)
        stack.enter_context(on_signals(rundir.flush, drain=drain, drain_s=DRAIN_S))
        preflight = Preflight(spec, job.judge_spec, job.env, say, start=s.hooks.get("start_gate"))
        stack.callback(preflight.cancel)
        limiters = s.hooks.get("limiters")  # a matrix's: one per endpoint, shared by its pairs
        watch = s.hooks.get("watch_progress") or (lambda shown: shown)  # a matrix shows every pair's progress
        runner = await make_runner(stack, spec, job.env, cfg, cache, pipeline, gate=preflight.model,
                               batch_dir=rundir.path if cfg.batch else None, price=job.price,
                               budget_left=(lambda: budget.left(meter.spent_usd)) if budget else None,
                               confirm=preflight.confirms["--model"], limiters=limiters)
        pool = runner.provider if isinstance(runner.provider, BatchPool) else None
        if budget is not None and pool is None:  # each request reserves its estimate before it is sent
            budget.hook(runner, meter.spent_usd)
        if queries:  # every value used, as the provider sends it (e.g. thinking budgets, dropped fields)
            config["generation_sent"] = runner.provider.describe_params(queries[0].params)
            rundir.write_config(identity, config)
        resume = await sort_records_off_loop(by_id, existing, runner.keys_of)
        # 0.1.0's answers, marked as such before anything is asked (so an interrupted run keeps the mark)
        marked = resume.mark_older(by_id, v010_dir=may_hold_unmarked_v010(
            rundir.path, v010_config=rundir.v010_config, records=existing.values()))
        kept = resume.kept_lines(by_id)
        if rundir.records_path.exists() and (marked or not rundir.holds_exactly(kept)):
            rundir.rewrite_records(kept)  # drop errors and duplicates; damaged lines go to records.damaged.jsonl
        if damaged:
            say(damaged_note(damaged, saved=True, then="their queries are asked again"))
        older = {} if cfg.reask or rundir.data_changed else resume.keep_older(by_id)
        reask_plan = await asyncio.to_thread(plan_dry_run, [by_id[q] for q in older], runner, job.price) \
            if older else None
        if reask_plan is not None:
            say(older_note(len(older), reask_plan))
        if resume.changed:
            say(f"{len(resume.changed)} answered queries were asked differently then (question, images or prompt "
                "changed); asking them again")
        again = set(to_reask(resume.current, job.cutoff_budget)) if job.cutoff_budget else set()
        if job.cutoff_budget:
            say(reask_note(len(again), job.cutoff_budget))
        for qid in again:  # the cut-off answer stays on disk until a new answer replaces it
            resume.changed[qid] = resume.current.pop(qid)
            by_id[qid] = with_budget(by_id[qid], job.cutoff_budget)
        queries = [by_id[q.id] for q in queries] if again else queries
        records.update(resume.current)
        waiting = resume.waiting  # their old answers stay on disk until a new answer replaces them
        todo = [q for q in queries if q.id not in records]
        already = len(records)
        if already:
            tell(f"{already:,} already answered, {len(todo):,} to ask" if todo
                 else f"all {already:,} queries already answered: nothing to ask")
        plotter = s.hooks.get("plotter") if cfg.plots else None  # the CLI's plot process: it imports
        # matplotlib while we ask
        if todo and plotter is not None:
            plotter.start()
        if cfg.group_images:
            todo = list(group_by_image(todo, window=cfg.concurrency))
        progress = RunProgress(len(todo), f"{bench.name} · {spec.label}", console, enabled=cfg.progress,
                               counters=runner.stats, spent=(lambda: meter.spent_usd) if job.price else None,
                               status=pool.status_line if pool is not None else runner.limiter.learned_line)
        watch(progress)

        def sink(outcome: Outcome) -> None:
            rec = mark(make_record(outcome, spec.label), outcome.query)
            if rec.query_id in again:
                rec = replace(rec, max_tokens=job.cutoff_budget)
            rec = grade(bench, outcome.query, rec, cfg.mode)
            records[rec.query_id] = rec
            fresh.add(rec.query_id)
            if rec.error is None or rec.query_id not in waiting:
                rundir.append(rec)
            meter.add(outcome)
            progress.advance(outcome)
            if on_record is not None:
                on_record()

        writes = WriteStop(rundir, cache)  # a failed write (a full disk) stops the sending

        def stopping() -> bool:
            return over_budget() or bool(draining) or writes.stopped()

        ask_start = time.perf_counter()
        with progress, writes:
            if todo:
                # twice as many workers as slots: a query waiting to retry holds a worker, never a slot
                # (batches: every query waits on its batch at once, and no group waits for its first)
                await runner.run(todo, sink, workers=waiting_workers(len(todo)) if pool else 2 * cfg.concurrency,
                                 stop=stopping,
                                 group_of=image_group if cfg.group_images and not pool else None)
                if pool is not None and cfg.batch_fallback == "live" and not draining:
                    async def live() -> Runner:
                        r = await make_runner(stack, spec, job.env, cfg, cache, pipeline, gate=preflight.model,
                                              confirm=preflight.confirms["--model"], limiters=limiters)
                        return r if budget is None else budget.hook(r, meter.spent_usd)

                    await fallback_live(live,
                                        [q for q in todo if q.id not in records], sink, workers=2 * cfg.concurrency,
                                        stop=stopping, say=say,
                                        timeout_s=cfg.batch_timeout)
        ask_s = time.perf_counter() - ask_start
        write_error = writes.error()
        if write_error is not None:  # the records are closed: what could not be written is counted in it
            raise write_error
        if draining:  # every reply that arrived is recorded (the stack flushes them): stop as Ctrl-C does
            raise KeyboardInterrupt
        if pool is not None:
            for note in batch_notes(pool, sum(q.id not in records for q in queries)):
                messages.append(note)
        mismatch = await preflight.simulator_mismatch()
        if mismatch:  # said with the results (the CLI prints messages after them), not during the run
            messages.append(mismatch)
        # records of this run were graded in the sink; only those resumed from disk need it
        ordered = [records[qid] if qid in fresh else grade(bench, by_id[qid], records[qid], cfg.mode)
                   for qid in by_id if qid in records]
        judge_stopped = None
        if job.judge_spec:
            judge_config = replace(cfg, rpm=None, tpm=None)
            judge_batch = cfg.batch and job.judge_spec.provider in BATCH_PROVIDERS  # judged in batches too
            judge_runner = await make_runner(stack, job.judge_spec, job.env, judge_config, cache, pipeline,
                                         fingerprints=False, gate=preflight.judge,
                                         batch_dir=rundir.path if judge_batch else None,
                                         confirm=preflight.confirms["--judge"], limiters=limiters)
            await judge_records(bench, by_id, ordered, judge_runner, mode=cfg.mode,
                                workers=waiting_workers(len(ordered)) if judge_batch else cfg.concurrency,
                                track=lambda n: watch(RunProgress(n, f"judge · {job.judge_spec.label}", console,
                                                                  enabled=cfg.progress, counters=judge_runner.stats)))
            judge_stopped = judge_runner.breaker.tripped
            if judge_stopped:
                messages.append(f"the judge stopped: {judge_runner.breaker.tripped}; every answer is kept, and "
                                f"`evalkit report {rundir.path} --judge {job.judge_spec.label}` judges the rest "
                                "later (or re-run the same command)")
    bench_opts = s.bench_dict()
    first, first_ids = first_repeat(ordered, by_id)  # the scores are repeat 0's (with --repeats 1: every record)
    summary = summarize(bench, first, model=spec.label, mode=cfg.mode, n_items=items_in(cfg.shard, items),
                        n_queries=len(first_ids),
                        options=bench_opts, config=config, judge=job.judge_spec.label if job.judge_spec else None,
                        queries=first_ids, not_in_run=len(resume.outside), unscored=resume.unscored(ordered))
    if cfg.repeats > 1:
        add_repeats(summary, bench, ordered, bench_opts, cfg.repeats, len(queries))
    summary.update(run_facts(rundir.path, ordered, identity, preflight.servers(), bench.official_source,
                             [records[q] for q in fresh], ask_s, runner, job.prepared.source.to_dict()))
    summary["data_source"] = job.prepared.source.to_dict(files=False)
    # `cache` counts how every answer arrived, in whichever run; this is what this command did
    summary["this_run"] = {"sent": runner.stats.sent, "from_cache": runner.stats.cache_hits, "already": already}
    summary["usage"]["cost_usd"] = records_cost(job.price, ordered)
    if any(r.via == "batch" for r in ordered):  # what the same answers would have cost live
        summary["usage"]["cost_live_usd"] = records_cost(job.price, [replace(r, via=None) for r in ordered])
    if pool is not None or (rundir.path / JOURNAL).exists():
        summary["batches"] = batch_summary(BatchJournal(rundir.path))
    summary["lint"] = job.lint.to_summary()
    if job.cutoff_budget:
        summary["reask_cutoffs"] = {"max_tokens": job.cutoff_budget, "queries": len(again)}
    if reask_plan is not None:
        summary["requests"] = OLDER_REQUESTS
        summary["older_requests"] = {"queries": len(older), "reask_requests": reask_plan.to_send,
                                     "reask_cost_usd": [reask_plan.cost_low_usd, reask_plan.cost_high_usd]}
    if runner.breaker.tripped:  # the error banner leads with it
        summary["stopped"] = "errors" if runner.breaker.exit_code == 1 else "account"
        summary["stopped_reason"] = runner.breaker.tripped
    elif judge_stopped:  # every answer is in; some wait for the judge: a re-run judges them
        summary["stopped"] = "judge"
        summary["complete"] = False
    if budget is not None:
        summary["budget"] = budget.to_summary(meter.spent_usd, budget.total(meter.spent_usd))
    if over_budget():
        messages.append(stop_line(budget, meter.spent_usd, summary["missing"]))  # type: ignore[arg-type]
        summary["stopped"] = "max_cost"
    data_only = _data_errors(summary, bench_opts, messages, bench.name, job.prepared)
    analysis = publish(rundir, summary, bench, first, bench_opts, plots=False,  # summary.json, report.md
                       figures=cfg.plots)
    rundir.rewrite_records(resume.final_lines(by_id, ordered))  # then the records in query order
    # then the plots (skipped when what they show is unchanged): by the CLI's plot process if it gave one
    # (a one-shot process has no matplotlib to reuse), else here (a long-lived process imports it once)
    if cfg.plots:
        draw_plots(rundir, summary, analysis, plotter)
    code = 0 if summary["complete"] else runner.breaker.exit_code if runner.breaker.tripped else 2 if data_only else 1
    return RunResult(summary, ordered, rundir.path, code, messages)


def _data_errors(summary: dict[str, Any], bench_opts: Mapping[str, Any], messages: list[str], bench: str,
                 prepared: Prepared) -> bool:
    """Items whose image could not be read (engine/data_errors.py): skipped under --skip-missing, else
    the closing line. True when they are all that keeps the run from complete (exit 2: a re-run cannot help)."""
    digest = summary.get("data_errors")
    if not digest:
        return False
    rest_done = not summary.get("failures") and not summary.get("missing") and not summary.get("stopped")
    if bench_opts.get("skip_missing"):
        digest["skipped"] = True
        summary["complete"] = rest_done
        return False
    wanted = set(digest["items"])
    by_id = {it.id: it for it in prepared.items if it.id in wanted}
    messages.append(closing_line(bench, prepared.data, digest, by_id, can_skip="skip_missing" in bench_opts))
    return rest_done


def older_note(n: int, plan: DryRunPlan) -> str:
    cost = "" if plan.cost_low_usd is None else f", est. ${plan.cost_low_usd:,.2f}–${plan.cost_high_usd:,.2f}"
    return (f"{n:,} answers were asked with evalkit 0.1's requests, not the official ones: kept and graded "
            f"(the run is marked requests: {OLDER_REQUESTS}); --reask asks them again officially "
            f"({plan.to_send:,} requests{cost})")
