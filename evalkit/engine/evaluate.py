"""One run, end to end: load -> expand -> ask -> parse -> (judge) -> aggregate -> write.

`run()` is the Python API; the CLI is a thin layer over it. Re-running with the same settings
resumes in the same run directory (location.py) and sends only what is missing, or was asked differently
(resume.py). One process at a time works in a run directory (lock.py). Every resource a run
opens (providers, cache, image pipeline and its threads, the records file) is owned by one
AsyncExitStack, so an error anywhere closes all of them and keeps every answer received.

Here: resolving the run (settings, endpoints, data, price, run directory) into a Job and the dry run;
the asking is engine/asking.py, the summary and the files it leaves engine/closing.py.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.shard import items_in
from evalkit.core.types import GenParams
from evalkit.data.source import data_headline, source_phrase
from evalkit.engine.budgeting import check_budget_flags
from evalkit.engine.cutoffs import split_options
from evalkit.engine.endpoints.specs import routed, specs_for
from evalkit.engine.job import Job, Talk
from evalkit.engine.location import forget_created, locate_cut_off_run, locate_run
from evalkit.engine.result import RunResult
from evalkit.engine.reuse import command_key, forget_stamp, reuse, reuse_command, stampable, write_stamp
from evalkit.engine.run_data import download_plan, prepare_data, prepare_sample, with_files
from evalkit.engine.stopping.in_thread import run_blocking
from evalkit.engine.stopping.write_stop import WriteStopped
from evalkit.lint import lint_at_start
from evalkit.money.pricing import load_prices, price_of
from evalkit.providers.image_setting import image_setting_note
from evalkit.providers.registry import info
from evalkit.rundir.lock import hold_run_dir


def run(bench: str, model: str, **options: Any) -> RunResult:
    """Evaluate `model` (e.g. "openai/gpt-4o") on benchmark `bench`; see `evalkit run BENCH --help` for
    the options (the keyword names are the flags' names with underscores). An unknown or wrong-typed
    option is an error naming it, raised before anything is written. `progress=False`: no progress
    line; `quiet=True`: nothing printed at all (the lines said are in RunResult.messages).

    Inside a running event loop (a notebook cell) the run goes on a worker thread with its own loop
    (engine/stopping/in_thread.py); interrupting the cell stops it as Ctrl-C does. `await run_async(...)` runs
    it on the caller's loop instead."""
    return run_blocking(lambda: run_async(bench, model, **options))


async def run_async(bench_name: str, model: str, **options: Any) -> RunResult:
    s = resolve_settings(bench_name, model, options)
    if s.config.until_decided and "stop_rule" not in s.hooks:  # the matrix's controller gives each run its rule
        raise EvalkitError("--until-decided compares models: give two or more --model (a matrix), or continue "
                           "runs with `evalkit compare --continue RUN...`; for one run's interval, --until-ci W")
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
    s = replace(s, config=routed(cfg, spec))  # --api, or the model's own route: in its requests' keys
    cfg = s.config
    ignorable = image_setting_note(spec.provider, cfg.detail, cfg.media_resolution)
    if ignorable is not None:  # a server the user runs may not read --detail: said once, at the start
        console.print(f"evalkit: {ignorable}", markup=False, highlight=False, soft_wrap=True)
    plan = download_plan(s, env) if cfg.dry_run else None
    if plan is not None:  # priced before anything is downloaded: the listing's sizes, the published count
        from evalkit.engine.dry_run import scaled_from_sample

        if plan.get("questions"):
            price = load_prices(Path(cfg.prices) if cfg.prices else None).price_for(spec.provider, spec.model)
            sample = prepare_sample(s, env)
            n_items = min(plan["questions"], cfg.limit or plan["questions"])
            estimate = await scaled_from_sample(sample.queries, len(sample.items), n_items, spec, env, cfg, price)
            plan = {**plan, **estimate, "notes": plan["notes"] + estimate["notes"]}
        return RunResult({"benchmark": bench_name, "model": spec.label, "dry_run": plan}, [], Path(cfg.out or "runs"), 0)
    price = load_prices(Path(cfg.prices) if cfg.prices else None).price_for(spec.provider, spec.model)
    # a matrix's pair is reused too: it sends nothing, so it settles its place at the start line when it
    # returns (multi/matrix.py), and its progress line shows it done
    reusable = cutoff_budget is None and not cfg.dry_run
    command = command_key(s, spec, judge_spec, price, env) if reusable else None
    if command is not None and cfg.out:  # nothing changed since this command's last full evaluation
        reused = reuse_command(s, command, console)
        if reused is not None:
            return reused
    with read_caps.using(cfg.max_line_mb, cfg.max_image_mb):  # no data line or image read past its cap
        prepared = prepare_data(s, spec, env, lambda line: console.print(f"evalkit: {line}", markup=False,
                                                                         highlight=False, soft_wrap=True))
    if cfg.repeats > 1:  # (the repeats' module imports the analysis: only when it is needed)
        from evalkit.engine.repeats import with_repeats

        prepared = prepared._replace(queries=with_repeats(prepared.queries, cfg.repeats,
                                                          spec.provider if cfg.batch else None))
    queries = prepared.queries
    if cfg.max_cost is not None and price_of(price, None, cfg.service_tier) is None and not info(spec.provider).reports_cost:
        tier = f" at --service-tier {cfg.service_tier}" if price is not None else ""
        raise EvalkitError(f"--max-cost needs a price for {spec.label}{tier}; none is known "
                           "(add one with --prices FILE)")
    where = locate_run(s, spec, prepared, env)  # (saves the data's file hashes in the cache folder)
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
              "concurrency": cfg.concurrency, "rpm": cfg.rpm, "tpm": cfg.tpm, "timeout_s": cfg.request_timeout,
              "max_attempts": cfg.max_attempts, "group_images": cfg.group_images,
              "price": price.__dict__ if price else None, "options": s.options_dict(),
              **({"repeats": cfg.repeats} if cfg.repeats > 1 else {}),
              **({"service_tier": cfg.service_tier} if cfg.service_tier else {}),  # delivery: not the identity
              "generation": queries[0].params.to_dict() if queries else GenParams().to_dict()}
    if cfg.dry_run:
        from evalkit.engine.dry_run import dry_run

        summary = await dry_run(where.rundir, queries, spec, env, cfg, price, prepared.bench.name, config)
        summary["dry_run"]["data"] = source_phrase(source, len(prepared.items))
        if cfg.limit and source.kind in ("hub", "archive"):
            summary["dry_run"].setdefault("notes", []).append(
                "--limit asks fewer questions but does not shrink the download: the whole set is fetched once")
        return RunResult(summary, [], where.rundir.path, 0)
    fresh = not where.rundir.path.exists()
    try:
        with hold_run_dir(where.rundir.path):  # one process per run directory, until its last write
            return await _evaluate(Job(s, spec, judge_spec, prepared, price, where, config, env, console,
                                        lint, cutoff_budget, command))
    except EvalkitError as e:
        # e.g. the endpoint cannot be reached: a run that received nothing leaves nothing, not even the
        # folders it made (one stopped by a full disk did receive: the cache may hold its answers)
        if fresh and not isinstance(e, WriteStopped) and where.rundir.remove_if_empty():
            forget_created(where.created)
        raise


async def _evaluate(job: Job) -> RunResult:
    """The run's steps, the run directory locked: open it, ask (engine/asking.py), close (engine/closing.py).
    Unless nothing changed since a full evaluation left it complete: then its outputs stand (engine/reuse.py)."""
    cfg, rundir = job.s.config, job.where.rundir
    talk = Talk(job.console)
    reused = reuse(job, talk, lambda t: _say_opening(job, t)) if job.command is not None else None
    if reused is not None:
        return reused
    # imported here: a run whose outputs stand (above) never loads the providers, the runner, grading or analysis
    from evalkit.engine.asking import ask
    from evalkit.engine.closing import close

    forget_stamp(rundir.path)
    rundir.immediate = cfg.no_cache  # --no-cache: nothing else keeps an answer; write each record as it arrives
    bound = rundir.bind(job.where.identity, job.config, legacy=job.where.legacy, data=job.where.data.to_dict(),
                        reask_changed=cfg.reask_changed)
    _say_opening(job, talk, bound)
    said_before, opening = len(talk.messages), list(talk.lines)
    existing = rundir.load_records()
    damaged = list(rundir.damaged)
    async with contextlib.AsyncExitStack() as stack:
        asked = await ask(job, stack, talk, existing, damaged)
    result = close(job, asked, talk)
    rundir.received_path.unlink(missing_ok=True)  # every answer journaled while asking is in records.jsonl now
    plain = not (damaged or asked.resume.outside or asked.resume.changed or asked.older or asked.budget)
    if job.command is not None and stampable(job, result, said_before=said_before, plain=plain):
        write_stamp(job, len(result.records), opening, job.command)
    return result


def _say_opening(job: Job, talk: Talk, bound: str | None = None) -> None:
    """What data the run is on, what binding the run directory found, the shard; the data's lint (lint.json)."""
    cfg, items, queries = job.s.config, job.prepared.items, job.prepared.queries
    talk.say(data_headline(job.prepared.source, len(items)))  # first: a score on the sample is not the benchmark's
    talk.say(job.where.note or bound)
    if cfg.shard:
        talk.say(f"shard {cfg.shard}: {items_in(cfg.shard, items):,} of {len(items):,} items ({len(queries):,} "
                 "queries); `evalkit merge` joins the shards into one run")
    job.lint.write(job.where.rundir.path)
    if job.lint.counts.get("error") or job.lint.counts.get("warning"):  # info stays in lint.json
        talk.tell(job.lint.line)  # summary["lint"] keeps it; lint.json has every finding
