"""`--batch`: a run's requests through the provider's batch API, at the batch price.

Only the runner's provider changes: a BatchPool (evalkit/ask/batch/pool.py) stands in for the live
provider, so cache keys, image preparation, records and scoring are those of a live run, and a
query answered either way is one cache entry. What differs is the waiting: every query not yet
answered waits at once (lines are not requests in flight), for up to --batch-timeout, and the
run directory's `batches.jsonl` lets the same command resume any batch it left behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.ask.batch.journal import JOURNAL, BatchJournal
from evalkit.ask.batch.pool import BatchPool, CostOf
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.store.cache import CacheLike
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig
from evalkit.core.types import GenParams, Message, Outcome, Query
from evalkit.images.pipeline import ImagePipeline, PreparedImage
from evalkit.money.costs import image_tokens
from evalkit.money.pricing import Price, estimate_cost
from evalkit.providers import create_batch_api, create_provider, parse_spec
from evalkit.providers.base import Provider
from evalkit.providers.batch_api import BatchGone, BatchUndecided
from evalkit.providers.image_setting import setting_of
from evalkit.rundir.layout import RunDir
from evalkit.rundir.lock import hold_run_dir

MAX_WAITING = 100_000  # queries waiting on batches at once (each holds its prepared images until answered)


def waiting_workers(n_todo: int) -> int:
    """Every query not answered waits on its batch at once: one worker each."""
    return max(1, min(n_todo, MAX_WAITING))


async def batch_runner(stack: contextlib.AsyncExitStack, live: Provider, env: Mapping[str, str], cfg: RunConfig,
                       cache: CacheLike, pipeline: ImagePipeline, run_dir: Path, *, fingerprints: bool = True,
                       gate: Callable[[], Awaitable[None]] | None = None, settle_s: float = 0.5,
                       poll_s: tuple[float, float] = (2.0, 60.0), price: Price | None = None,
                       budget_left: Callable[[], float | None] | None = None) -> tuple[Runner, BatchPool]:
    """A runner whose provider is a batch pool over `live` (the stack closes both). With a price and a
    budget, each batch is checked at submission against its lines' worst-case cost (--max-cost)."""
    api = create_batch_api(live, env, timeout_s=max(cfg.request_timeout, 300.0))
    stack.push_async_callback(api.close)  # type: ignore[attr-defined]
    pool = BatchPool(live, api, BatchJournal(run_dir), run_tag=run_dir.name[:24], settle_s=settle_s, poll_s=poll_s,
                     wait=cfg.wait, timeout_s=cfg.batch_timeout,
                     cost_of=worst_case_cost(price, live.spec.provider, live.spec.model) if price is not None else None,
                     budget_left=budget_left, token_budget=cfg.batch_tokens,
                     tokens_of=prompt_tokens_of(live.spec.provider, live.spec.model))
    stack.push_async_callback(pool.close)
    limiter = Limiter(concurrency=MAX_WAITING)
    # the pool keeps --batch-timeout itself (what is still pending then is left for a later run, never
    # asked twice): the runner's own timeout only guards against a pool that never answers
    policy = RetryPolicy(max_attempts=cfg.max_attempts, timeout_s=cfg.batch_timeout + 600,
                         max_retry_after_s=cfg.max_retry_after)
    runner = Runner(pool, limiter=limiter, cache=cache, pipeline=pipeline, policy=policy,  # type: ignore[arg-type]
                    fingerprints=fingerprints, gate=gate)
    return runner, pool


def worst_case_cost(price: Price, provider: str, model: str = "") -> CostOf:
    """A request's cost if it used all of max_tokens, at the batch price (for --max-cost at submission)."""
    batch = price.batch()

    prompt_tokens = prompt_tokens_of(provider, model)

    def cost(messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> float:
        return estimate_cost(batch, prompt_tokens(messages, params, images), params.max_tokens) or 0.0

    return cost


def prompt_tokens_of(provider: str, model: str = ""
                     ) -> Callable[[Sequence[Message], GenParams, Sequence[PreparedImage]], int]:
    """A batch line's input tokens as a provider counts them against its enqueued-token limit: the text's
    (a quarter of its characters) and each image's by the provider's formula for the model and the line's
    resolution setting, at the size sent."""

    def tokens(messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> int:
        setting = setting_of(params.detail, params.media_resolution)
        return sum(len(m.text()) for m in messages) // 4 + sum(image_tokens(provider, i.width, i.height, model,
                                                                            setting) for i in images)

    return tokens


def batch_notes(pool: BatchPool, unanswered: int) -> list[str]:
    """What the user should know after a batch run: lost batches, and what is still pending."""
    notes = list(pool.stats.notes)
    pending = [b for b in pool.journal.batches.values() if b.state == "running"]
    if pending and unanswered:
        notes.append(f"{unanswered:,} queries wait in {len(pending)} batch(es) at {pool.api.provider} "
                     f"({', '.join(b.batch_id or '?' for b in pending[:3])}{', …' if len(pending) > 3 else ''}); "
                     "re-run the same command to collect them (nothing is submitted again)")
    return notes


def batch_summary(journal: BatchJournal) -> dict[str, Any]:
    """summary.json's "batches": every batch of this run directory, and the requests in each state."""
    batches = [b.to_dict() for b in journal.batches.values()]
    states: dict[str, int] = {}
    for b in batches:
        states[b["state"]] = states.get(b["state"], 0) + 1
    return {"n_batches": len(batches), "states": states, "requests": sum(b["requests"] for b in batches),
            "batches": batches}


async def fallback_live(make_live: Callable[[], Awaitable[Runner]], late: Sequence[Query],
                        sink: Callable[[Outcome], None], *, workers: int, stop: Callable[[], bool],
                        say: Callable[[str], None], timeout_s: float) -> None:
    """--batch-fallback live: the queries no batch answered within --batch-timeout, sent live now.
    Their batch lines keep running at the provider (an answer that comes later is not used)."""
    if not late:
        return
    say(f"--batch-fallback live: {len(late):,} queries unanswered after --batch-timeout {timeout_s:g} s "
        "are sent live now")
    runner = await make_live()
    await runner.run(late, sink, workers=workers, stop=stop)


async def run_dir_batches(run_dir: Path, env: Mapping[str, str], *, cancel: bool = False
                          ) -> tuple[list[dict[str, Any]], str | None]:
    """`evalkit batches RUN_DIR [--cancel]`: the run directory's batches, their state asked of the
    provider (and cancelled with `cancel`). While a run works in the directory, its journal is shown
    as that run keeps it (the note says so); cancelling then is refused."""
    if not (run_dir / JOURNAL).is_file():
        if not (run_dir / "config.json").is_file():
            raise EvalkitError(f"{run_dir}: not a run directory (no config.json)")
        return [], None
    try:
        with hold_run_dir(run_dir, advice="cancel once it has stopped (Ctrl-C), or wait for it"):
            note = await _refresh(run_dir, env, cancel=cancel)
    except EvalkitError:
        if cancel:
            raise
        journal = BatchJournal(run_dir)
        note = "a run is working in this directory: the states are as it last saw them"
        return [b.to_dict() for b in journal.batches.values()], note
    return [b.to_dict() for b in BatchJournal(run_dir).batches.values()], note


async def _refresh(run_dir: Path, env: Mapping[str, str], *, cancel: bool) -> str | None:
    """Each batch's state asked of the provider (and cancelled); a note for intents that cannot be told yet."""
    journal = BatchJournal(run_dir)
    running = [(t, b) for t, b in journal.batches.items() if b.state in ("intent", "running")]
    if not running:
        return None
    unconfirmed: list[str] = []
    identity = RunDir(run_dir).read_config().get("identity", {})
    urls = tuple(u for u in str(identity.get("endpoint") or "").split(",") if u and not u.startswith("tag:"))
    live = create_provider(parse_spec(str(identity.get("model")), urls, env), env)
    api = create_batch_api(live, env)
    try:
        for tag, b in running:
            if b.batch_id is None:  # an intent: the provider's list says whether it was created
                try:
                    found = await api.find(tag, b.custom_ids, b.since)
                except BatchUndecided as e:  # no tag on the batch: known once the candidates have ended
                    unconfirmed += e.candidates
                    continue
                if not found:
                    journal.lost(tag)
                    continue
                journal.submitted(tag, found[0].id)
                b = journal.batches[tag]
            assert b.batch_id is not None
            try:
                if cancel:
                    await api.cancel(b.batch_id)
                s = await api.status(b.batch_id)
            except BatchGone:
                journal.lost(tag)
                continue
            journal.state(b.batch_id, s.state, provider_state=s.provider_state, done=s.done, failed=s.failed)
    finally:
        await api.close()  # type: ignore[attr-defined]
        await live.close()  # type: ignore[attr-defined]
    if not unconfirmed:
        return None
    return (f"an intent has no batch id yet (a run stopped before recording it): {', '.join(unconfirmed)} "
            f"may be its batch; {api.provider} batches carry no tag, so that is known once they have ended"
            + (" (nothing was cancelled for it)" if cancel else "") + "; the next run of the same command "
            "waits for them and takes one only if its results hold exactly the intent's requests")
