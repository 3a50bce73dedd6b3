"""A run's asking: open what it asks through, sort the records found, ask what is missing, judge.

Every resource (cache, budget, image pipeline, signal handlers, runners) is entered on the caller's
AsyncExitStack, so an error anywhere closes all of them and keeps every answer received. What the
run's results need comes back as one `Asked`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from evalkit.ask.batch.pool import BatchPool
from evalkit.ask.runner import Runner
from evalkit.ask.schedule import group_by_image, image_group
from evalkit.ask.store.received import ReceivedJournal, replay
from evalkit.benchmarks.readers.saved_index import keep_image_hashes
from evalkit.core import read_caps
from evalkit.core.record import Record
from evalkit.core.types import Outcome, Query
from evalkit.engine.budgeting import RunBudget, open_budget, start_line
from evalkit.engine.cutoffs import reask_note, to_reask, with_budget
from evalkit.engine.endpoints.batching import batch_notes, fallback_live, waiting_workers
from evalkit.engine.endpoints.gate import Preflight
from evalkit.engine.endpoints.wiring import make_runner, open_cache
from evalkit.engine.job import Job, Talk
from evalkit.engine.repeats import mark
from evalkit.engine.resume import OLDER_REQUESTS, Resume, may_hold_unmarked_v010, sort_records_off_loop
from evalkit.engine.stopping.shutdown import on_signals
from evalkit.engine.stopping.write_stop import WriteStop
from evalkit.engine.until.ci import until_ci_rule
from evalkit.engine.until.rule import StopRule
from evalkit.engine.until.waves import waves
from evalkit.grading.grade import grade, judge_records, make_record
from evalkit.images.pipeline import ImagePipeline
from evalkit.money.costs import CostMeter, DryRunPlan, plan_dry_run
from evalkit.providers import has_batch_api
from evalkit.report.progress import RunProgress
from evalkit.rundir.records import damaged_note

DRAIN_S = 10.0  # after Ctrl-C/SIGTERM, how long replies already on their way may take to arrive


@dataclass
class Asked:
    """What asking leaves for the results: every record in query order, and how this command got them."""

    by_id: dict[str, Query]
    queries: list[Query]
    ordered: list[Record]
    fresh: list[Record]  # answered by this command
    resume: Resume
    runner: Runner
    pool: BatchPool | None
    preflight: Preflight
    meter: CostMeter
    budget: RunBudget | None
    already: int
    ask_s: float
    again: set[str] = field(default_factory=set)  # --reask-cutoffs: the cut-off answers asked again
    older: int = 0  # 0.1.0's answers kept
    reask_plan: DryRunPlan | None = None  # what asking those again would cost
    judge_stopped: str | None = None
    rule: StopRule | None = None  # a sampled run's (--until-ci, a matrix's --until-decided): summary["sample"]

    def over_budget(self) -> bool:
        return self.budget is not None and self.budget.over(self.meter.spent_usd)


async def ask(job: Job, stack: contextlib.AsyncExitStack, talk: Talk, existing: dict[str, Record],
              damaged: list[str]) -> Asked:
    """Ask every query of the job that has no current answer in `existing` (the run directory's records)."""
    return await _Asking(job, stack, talk).run(existing, damaged)


class _Asking:
    """One run's asking, step by step; the steps share the run's resources."""

    def __init__(self, job: Job, stack: contextlib.AsyncExitStack, talk: Talk):
        self.job, self.stack, self.talk = job, stack, talk
        self.cfg = job.s.config
        self.rundir = job.where.rundir
        self.by_id = {q.id: q for q in job.prepared.queries}
        self.queries = job.prepared.queries
        self.records: dict[str, Record] = {}
        self.fresh: set[str] = set()
        self.graded: set[str] = set()  # resumed records graded for the stop rule (not again)
        self.rule: StopRule | None = None
        self.meter = CostMeter(job.price)
        self.draining: list[int] = []
        self.limiters = job.s.hooks.get("limiters")  # a matrix's: one per endpoint, shared by its pairs
        self.watch = job.s.hooks.get("watch_progress") or (lambda shown: shown)  # a matrix shows every pair

    async def run(self, existing: dict[str, Record], damaged: list[str]) -> Asked:
        await self._open(existing)
        resume, older, reask_plan, again = await self._sort(existing, damaged)
        already = len(self.records)
        self._stop_rule()
        ask_s = await self._send(resume.waiting, again, already)
        if self.pool is not None:
            for note in batch_notes(self.pool, sum(q.id not in self.records for q in self.queries)):
                self.talk.messages.append(note)
        mismatch = await self.preflight.simulator_mismatch()
        if mismatch:  # said with the results (the CLI prints messages after them), not during the run
            self.talk.messages.append(mismatch)
        bench, mode = self.job.prepared.bench, self.cfg.mode
        # records of this run were graded in the sink; only those resumed from disk need it
        ordered = [self.records[qid] if qid in self.fresh or qid in self.graded
                   else grade(bench, self.by_id[qid], self.records[qid], mode) for qid in self.by_id if qid in self.records]
        judge_stopped = await self._judge(ordered) if self.job.judge_spec else None
        return Asked(self.by_id, self.queries, ordered, [self.records[q] for q in self.fresh], resume, self.runner,
                     self.pool, self.preflight, self.meter, self.budget, already, ask_s, again, len(older),
                     reask_plan, judge_stopped, self.rule)

    def _stop_rule(self) -> None:
        """A sampled run's rule (the `stop_rule` hook's, else --until-ci's), shown the records resumed."""
        hook = self.job.s.hooks.get("stop_rule")
        self.rule = hook(self.job) if hook is not None else until_ci_rule(
            self.queries, self.job.prepared.bench, self.job.s.bench_dict(), self.rundir.path,
            width=self.cfg.until_ci, seed=self.cfg.sample_seed)
        if self.rule is None:
            return
        bench, mode = self.job.prepared.bench, self.cfg.mode
        for qid, rec in self.records.items():
            self.records[qid] = rec = grade(bench, self.by_id[qid], rec, mode)
            self.graded.add(qid)
            self.rule.observe(rec)

    async def _open(self, existing: dict[str, Record]) -> None:
        """Cache, budget, image pipeline, signal handlers, preflight and the model's runner."""
        job, cfg, stack, say = self.job, self.cfg, self.stack, self.talk.say
        self.cache = stack.enter_context(open_cache(cfg, job.env, say))
        # answers a killed process received and did not record: found by the lookups, never asked again
        self.received = ReceivedJournal(self.rundir.received_path)
        stack.callback(self.received.close)
        if self.received.path.exists():
            self.cache = await asyncio.to_thread(replay, self.received, self.cache)
        self.budget = open_budget(stack, cfg, job.env, job.price, job.spec.provider, existing.values(),
                                  job.spec.model)
        if self.budget is not None:
            say(start_line(self.budget))
        self.pipeline = stack.enter_context(contextlib.closing(ImagePipeline(
            max_image_bytes=int(cfg.max_image_mb * read_caps.MB))))
        self.pipeline.note = say  # an image over Pillow's decompression-bomb limit is named on the console
        self.pipeline.know_hashes(job.where.known)  # the data's fingerprint read every image: not again
        index = job.prepared.index
        if index is not None:  # images of a big data file: hashed by earlier runs, kept with its saved index
            self.pipeline.know_span_hashes(index.image_hashes)
            stack.callback(lambda: keep_image_hashes(index, self.pipeline.span_hashes()))
        stack.callback(self.rundir.close)  # flushes records received so far, whatever happens next

        def drain() -> None:  # the first Ctrl-C/SIGTERM: no new request; replies on their way are kept
            self.draining.append(1)
            job.console.print(f"evalkit: interrupted: receiving the replies already on their way (up to "
                              f"{DRAIN_S:g} s; interrupt again to stop at once)", markup=False, highlight=False)

        # SIGINT/SIGTERM: flush, drain, then KeyboardInterrupt (exit 130)
        stack.enter_context(on_signals(self.rundir.flush, drain=drain, drain_s=DRAIN_S))
        self.preflight = Preflight(job.spec, job.judge_spec, job.env, say, start=job.s.hooks.get("start_gate"))
        stack.callback(self.preflight.cancel)
        budget, meter = self.budget, self.meter
        self.runner = await make_runner(stack, job.spec, job.env, cfg, self.cache, self.pipeline,
                                        gate=self.preflight.model, batch_dir=self.rundir.path if cfg.batch else None,
                                        price=job.price,
                                        budget_left=(lambda: budget.left(meter.spent_usd)) if budget else None,
                                        confirm=self.preflight.confirms["--model"], limiters=self.limiters)
        # --no-cache writes each record as it arrives (evaluate.py): the record is the journal there
        self.journal = None if cfg.no_cache else self.received.add
        self.runner.received = self.journal
        self.pool = self.runner.provider if isinstance(self.runner.provider, BatchPool) else None
        if budget is not None and self.pool is None:  # each request reserves its estimate before it is sent
            budget.hook(self.runner, meter.spent_usd)
        if self.queries:  # every value used, as the provider sends it (e.g. thinking budgets, dropped fields)
            job.config["generation_sent"] = self.runner.provider.describe_params(self.queries[0].params)
            self.rundir.write_config(job.where.identity, job.config)

    async def _sort(self, existing: dict[str, Record], damaged: list[str]
                    ) -> tuple[Resume, dict[str, Record], DryRunPlan | None, set[str]]:
        """Which records stand, which queries are asked again (changed requests, --reask-cutoffs), and
        0.1.0's answers kept; records.jsonl rewritten without errors and duplicates first."""
        job, cfg, rundir, by_id, say = self.job, self.cfg, self.rundir, self.by_id, self.talk.say
        resume = await sort_records_off_loop(by_id, existing, self.runner.keys_of)
        # 0.1.0's answers, marked as such before anything is asked (so an interrupted run keeps the mark)
        marked = resume.mark_older(by_id, v010_dir=may_hold_unmarked_v010(
            rundir.path, v010_config=rundir.v010_config, records=existing.values()))
        kept = resume.kept_lines(by_id)
        if rundir.records_path.exists() and (marked or not rundir.holds_exactly(kept)):
            rundir.rewrite_records(kept)  # drop errors and duplicates; damaged lines go to records.damaged.jsonl
        if damaged:
            say(damaged_note(damaged, saved=True, then="their queries are asked again"))
        older = {} if cfg.reask or rundir.data_changed else resume.keep_older(by_id)
        reask_plan = await asyncio.to_thread(plan_dry_run, [by_id[q] for q in older], self.runner, job.price) \
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
        self.queries = [by_id[q.id] for q in self.queries] if again else self.queries
        self.records.update(resume.current)
        return resume, older, reask_plan, again

    async def _send(self, waiting: dict[str, Record], again: set[str], already: int) -> float:
        """Ask every query without a record (then, under --batch-fallback live, what the batches left);
        the seconds it took."""
        job, cfg, spec, runner, pool = self.job, self.cfg, self.job.spec, self.runner, self.pool
        todo = [q for q in self.queries if q.id not in self.records]
        if already:
            self.talk.tell(f"{already:,} already answered, {len(todo):,} to ask" if todo
                           else f"all {already:,} queries already answered: nothing to ask")
        # the CLI's plot process imports matplotlib while we ask: started with the first answer not from the
        # cache (answers that all are may show figures the cache folder holds: closing.py)
        plotter = job.s.hooks.get("plotter") if cfg.plots and todo else None
        rule = self.rule
        if rule is not None:  # its order (whole variant groups, seeded, by stratum): never regrouped by image
            todo = rule.order(todo)
        elif cfg.group_images:
            todo = list(group_by_image(todo, window=cfg.concurrency))
        meter = self.meter
        progress = RunProgress(len(todo), f"{job.prepared.bench.name} · {spec.label}", job.console,
                               enabled=cfg.progress, counters=runner.stats, tier=runner.service_tier,
                               spent=(lambda: meter.spent_usd) if job.price else None,
                               status=pool.status_line if pool is not None else runner.limiter.learned_line)
        self.watch(progress)
        on_record: Callable[[], None] | None = job.s.hooks.get("on_record")  # for tests and embedding tools

        def sink(outcome: Outcome) -> None:
            nonlocal plotter
            if plotter is not None and not outcome.cached:
                plotter.start()
                plotter = None
            rec = mark(make_record(outcome, spec.label), outcome.query)
            if rec.query_id in again:
                rec = replace(rec, max_tokens=job.cutoff_budget)
            rec = grade(job.prepared.bench, outcome.query, rec, cfg.mode)
            self.records[rec.query_id] = rec
            self.fresh.add(rec.query_id)
            if rule is not None:
                rule.observe(rec)
            if rec.error is None or rec.query_id not in waiting:
                self.rundir.append(rec)
            meter.add(outcome)
            progress.advance(outcome)
            if on_record is not None:
                on_record()

        writes = WriteStop(self.rundir, self.cache, self.received if self.journal else None)  # a full disk stops

        def stopping() -> bool:
            return (self.budget is not None and self.budget.over(meter.spent_usd)) or bool(self.draining) \
                or writes.stopped() or (rule is not None and rule.done())

        start = time.perf_counter()
        with progress, writes:
            if todo and pool is not None and rule is not None:  # a sample in batches: waves, the rule between
                todo = await self._waves(todo, sink, stopping)
            elif todo:
                # twice as many workers as slots: a query waiting to retry holds a worker, never a slot
                # (batches: every query waits on its batch at once, and no group waits for its first)
                await runner.run(todo, sink, workers=waiting_workers(len(todo)) if pool else 2 * cfg.concurrency,
                                 stop=stopping,
                                 group_of=image_group if cfg.group_images and not pool and rule is None else None)
            if todo and pool is not None and cfg.batch_fallback == "live" and not self.draining:
                await fallback_live(self._live_runner, [q for q in todo if q.id not in self.records], sink,
                                    workers=2 * cfg.concurrency, stop=stopping, say=self.talk.say,
                                    timeout_s=cfg.batch_timeout)
        ask_s = time.perf_counter() - start
        write_error = writes.error()
        if write_error is not None:  # the records are closed: what could not be written is counted in it
            raise write_error
        if self.draining:  # every reply that arrived is recorded (the stack flushes them): stop as Ctrl-C does
            raise KeyboardInterrupt
        return ask_s

    async def _waves(self, todo: list[Query], sink: Callable[[Outcome], None], stop: Callable[[], bool]) -> list[Query]:
        """--batch with a stop rule: one wave at a time until the rule is done or a wave is left unanswered
        (--no-wait, the batch timeout: the same command collects it); the queries sent."""
        sent: list[Query] = []
        for wave in waves(todo, len({q.base_id for q in self.queries})):
            if stop():
                break
            sent += wave
            await self.runner.run(wave, sink, workers=waiting_workers(len(wave)), stop=stop)
            if any(q.id not in self.records for q in wave):
                break
        return sent

    async def _live_runner(self) -> Runner:
        """--batch-fallback live: a live runner for what the batches did not answer in time."""
        job = self.job
        r = await make_runner(self.stack, job.spec, job.env, self.cfg, self.cache, self.pipeline,
                              gate=self.preflight.model, confirm=self.preflight.confirms["--model"],
                              limiters=self.limiters)
        r.received = self.journal
        return r if self.budget is None else self.budget.hook(r, self.meter.spent_usd)

    async def _judge(self, ordered: list[Record]) -> str | None:
        """--judge: judge the graded records; why the judge stopped, if it did."""
        job, cfg, rundir = self.job, self.cfg, self.rundir
        judge_spec = job.judge_spec
        assert judge_spec is not None
        judge_config = replace(cfg, rpm=None, tpm=None, service_tier=None, tier_fallback=None)  # the model's alone
        judge_batch = cfg.batch and has_batch_api(judge_spec)  # judged in batches too
        judge_runner = await make_runner(self.stack, judge_spec, job.env, judge_config, self.cache, self.pipeline,
                                         fingerprints=False, gate=self.preflight.judge,
                                         batch_dir=rundir.path if judge_batch else None,
                                         confirm=self.preflight.confirms["--judge"], limiters=self.limiters)
        judge_runner.received = self.received.add  # judged records are written at the end: journaled always
        await judge_records(job.prepared.bench, self.by_id, ordered, judge_runner, mode=cfg.mode,
                            workers=waiting_workers(len(ordered)) if judge_batch else cfg.concurrency,
                            track=lambda n: self.watch(RunProgress(n, f"judge · {judge_spec.label}", job.console,
                                                                   enabled=cfg.progress,
                                                                   counters=judge_runner.stats)))
        stopped = judge_runner.breaker.tripped
        if stopped:
            self.talk.messages.append(f"the judge stopped: {stopped}; every answer is kept, and "
                                      f"`evalkit report {rundir.path} --judge {judge_spec.label}` judges the rest "
                                      "later (or re-run the same command)")
        return stopped


def older_note(n: int, plan: DryRunPlan) -> str:
    cost = "" if plan.cost_low_usd is None else f", est. ${plan.cost_low_usd:,.2f}–${plan.cost_high_usd:,.2f}"
    return (f"{n:,} answers were asked with evalkit 0.1's requests, not the official ones: kept and graded "
            f"(the run is marked requests: {OLDER_REQUESTS}); --reask asks them again officially "
            f"({plan.to_send:,} requests{cost})")
