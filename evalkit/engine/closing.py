"""A run's results: the summary of what was asked, then summary.json, report.md, records, plots.

The order matters: summary.json and report.md first (the answer to "how did it do"), then the
records in query order, then the plots, which may wait on the CLI's plot process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.ask.batch.journal import JOURNAL, BatchJournal
from evalkit.ask.store.seal import rejected_line
from evalkit.benchmarks.prepare import Prepared
from evalkit.core.shard import items_in
from evalkit.engine.asking import Asked
from evalkit.engine.budgeting import stop_line
from evalkit.engine.data_errors import closing_line
from evalkit.engine.endpoints.batching import batch_summary
from evalkit.engine.job import Job, Talk
from evalkit.engine.repeats import add_repeats, first_repeat
from evalkit.engine.result import RunResult
from evalkit.engine.resume import OLDER_REQUESTS
from evalkit.grading.grade import summarize
from evalkit.metrics.fit_store import fits_kept_in, shared_kept_in
from evalkit.money.costs import cost_fields, paid_now
from evalkit.report.figure_memo import FIGURES
from evalkit.report.outputs import draw_plots, publish
from evalkit.rundir.provenance import run_facts, tier_summary


def summary_of(job: Job, asked: Asked, talk: Talk) -> tuple[dict[str, Any], bool]:
    """The run's summary (scores of repeat 0, provenance, costs, how it stopped); True when the data's
    unreadable items are all that keeps it from complete."""
    s, cfg, spec, rundir = job.s, job.s.config, job.spec, job.where.rundir
    bench, ordered, runner = job.prepared.bench, asked.ordered, asked.runner
    bench_opts = s.bench_dict()
    first, first_ids = first_repeat(ordered, asked.by_id)  # the scores are repeat 0's (--repeats 1: every record)
    summary = summarize(bench, first, model=spec.label, mode=cfg.mode, n_items=items_in(cfg.shard, job.prepared.items),
                        n_queries=len(first_ids), options=bench_opts, config=job.config,
                        judge=job.judge_spec.label if job.judge_spec else None, queries=first_ids,
                        not_in_run=len(asked.resume.outside), unscored=asked.resume.unscored(ordered))
    if cfg.repeats > 1:
        add_repeats(summary, bench, ordered, bench_opts, cfg.repeats, len(asked.queries))
    summary.update(run_facts(rundir.path, ordered, job.where.identity, asked.preflight.servers(),
                             bench.official_source, asked.fresh, asked.ask_s, runner, job.prepared.source.to_dict(),
                             service_tier=cfg.service_tier,
                             cache_dir=None if cfg.no_cache else Path(cfg.cache_path(job.env))))
    summary["data_source"] = job.prepared.source.to_dict(files=False)
    if job.prepared.parts:  # every source where the data has more than one (report.md names them all)
        summary["data_parts"] = [p.to_dict(files=False) for p in job.prepared.parts]
    # `cache` counts how every answer arrived, in whichever run; this is what this command did
    # (and what it paid: `usage.cost_usd` is what the run directory's answers cost when they were asked,
    # `usage.list_cost_usd` what they all cost at list price, cache hits included: money/costs.py)
    summary["this_run"] = {"sent": runner.stats.sent, "from_cache": runner.stats.cache_hits, "already": asked.already,
                           "cost_usd": paid_now(job.price, asked.fresh)}
    summary["cache"]["rejected"] = rejected = getattr(runner.cache, "rejected", 0)  # entries not served (cache_seal)
    if rejected:
        talk.messages.append(rejected_line(rejected))
    summary["usage"].update(cost_fields(job.price, ordered))
    tiers = tier_summary(cfg.service_tier, ordered)
    if tiers is not None:  # --service-tier, or answers a tier served: which tier served how many (core/tiers.py)
        summary["service_tier"] = tiers
    if asked.pool is not None or (rundir.path / JOURNAL).exists():
        summary["batches"] = batch_summary(BatchJournal(rundir.path))
    summary["lint"] = job.lint.to_summary()
    if job.cutoff_budget:
        summary["reask_cutoffs"] = {"max_tokens": job.cutoff_budget, "queries": len(asked.again)}
    if asked.reask_plan is not None:
        plan = asked.reask_plan
        summary["requests"] = OLDER_REQUESTS
        summary["older_requests"] = {"queries": asked.older, "reask_requests": plan.to_send,
                                     "reask_cost_usd": [plan.cost_low_usd, plan.cost_high_usd]}
    if runner.breaker.tripped:  # the error banner leads with it
        summary["stopped"] = "errors" if runner.breaker.exit_code == 1 else "account"
        summary["stopped_reason"] = runner.breaker.tripped
    elif asked.judge_stopped:  # every answer is in; some wait for the judge: a re-run judges them
        summary["stopped"] = "judge"
        summary["complete"] = False
    budget, spent = asked.budget, asked.meter.spent_usd
    if budget is not None:
        summary["budget"] = budget.to_summary(spent, budget.total(spent))
    if asked.over_budget():
        talk.messages.append(stop_line(budget, spent, summary["missing"]))  # type: ignore[arg-type]
        summary["stopped"] = "max_cost"
    _sample(summary, asked)
    return summary, _data_errors(summary, bench_opts, talk.messages, bench.name, job.prepared)


def close(job: Job, asked: Asked, talk: Talk) -> RunResult:
    """Summarize, then write summary.json and report.md, the records in query order, and the plots."""
    cfg, rundir, bench = job.s.config, job.where.rundir, job.prepared.bench
    cache_dir = None if cfg.no_cache else Path(cfg.cache_path(job.env))
    # the reliability fits of unchanged records are not computed again, nor a headline interval (one per
    # score table, kept in the cache folder: a fresh --out on a warm cache has the same table)
    with fits_kept_in(rundir.path), shared_kept_in(cache_dir):
        summary, data_only = summary_of(job, asked, talk)
        first, _ = first_repeat(asked.ordered, asked.by_id)
        analysis = publish(rundir, summary, bench, first, job.s.bench_dict(), plots=False,  # summary.json, report.md
                           figures=cfg.plots)
    rundir.rewrite_records(asked.resume.final_lines(asked.by_id, asked.ordered))  # then the records in query order
    # then the plots (skipped when what they show is unchanged): by the CLI's plot process if it gave one
    # (a one-shot process has no matplotlib to reuse), else here (a long-lived process imports it once)
    if cfg.plots:
        memo = None if cache_dir is None else cache_dir / FIGURES  # figures drawn before
        draw_plots(rundir, summary, analysis, job.s.hooks.get("plotter"), memo)
    runner = asked.runner
    code = 0 if summary["complete"] or summary.get("stopped") == "sample" else runner.breaker.exit_code if runner.breaker.tripped else 2 if data_only else 1
    return RunResult(summary, asked.ordered, rundir.path, code, talk.messages)


def _sample(summary: dict[str, Any], asked: Asked) -> None:
    """A sampled run's block; stopped "sample" (exit 0, not complete) when its rule was satisfied and
    nothing else stopped it."""
    rule = asked.rule
    block = rule.block() if rule is not None else None
    if block is None:
        return
    summary["sample"] = block
    if rule is not None and rule.done() and not summary.get("stopped"):
        summary["stopped"] = "sample"
        summary["complete"] = False


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
