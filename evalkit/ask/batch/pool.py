"""Batch mode: the runner's provider becomes a pool that gathers requests into provider batches.

The pool stands in for the live provider inside the runner, so everything else stays the same —
cache keys, image preparation, retries, records, accounting. `complete()` turns the request into a
batch line (the live body; its custom id a digest of it) and waits for that line's answer:

- from a batch this run directory already holds for it (`batches.jsonl`): a resumed run never
  submits a line that is pending or already answered, it polls or collects that batch;
- else the line joins the batch being formed, which is submitted when it is full (the provider's
  documented limits) or when no new line has come for `settle_s`.

A batch an earlier run created but did not record (a kill between the two) is found by its tag, never
submitted again (evalkit.ask.batch.intents); where the provider keeps no tag (Anthropic), its lines
wait until the batch that may hold them has ended, and are answered from it only if its results hold
exactly them. A line that failed inside a batch (errored, expired, cancelled, a batch the provider no
longer knows) comes back as a classified error: the runner's retry policy resubmits transient ones in
a new batch and records permanent ones. With `wait=False` the pool submits and leaves: every line not
yet answered is `NotSent` (the run is incomplete and resumable).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from evalkit.ask.batch.intents import Intents
from evalkit.ask.batch.journal import BatchJournal
from evalkit.ask.outcome import NotSent
from evalkit.core.errors import ProviderError
from evalkit.core.types import Response
from evalkit.providers.batch_api import (
    ENVELOPE_BYTES,
    BatchAPI,
    BatchGone,
    BatchLine,
    BatchStatus,
    BatchUndecided,
)

if TYPE_CHECKING:
    from evalkit.core.types import GenParams, Message
    from evalkit.images.pipeline import PreparedImage
    from evalkit.providers.base import Provider

# a request's worst-case cost in USD (its estimated input and all of max_tokens, at the batch price)
CostOf = Callable[["Sequence[Message]", "GenParams", "Sequence[PreparedImage]"], float]
# a request's input tokens, as a provider counts them against its enqueued-token limit (--batch-tokens)
TokensOf = Callable[["Sequence[Message]", "GenParams", "Sequence[PreparedImage]"], int]


class NotWaiting(NotSent):
    """`--no-wait`: this line is submitted (or pending) and the run does not wait for it."""


@dataclass
class PoolStats:
    batches: int = 0  # batches this run submitted
    pending: int = 0  # lines waiting for an answer
    done: int = 0  # lines answered from a batch
    failed: int = 0  # lines that failed inside a batch
    resumed: int = 0  # lines found in a batch submitted by an earlier run
    over_budget: int = 0  # lines not submitted: their worst-case cost would pass --max-cost
    states: dict[str, str] = field(default_factory=dict)  # batch id -> the provider's own word
    notes: list[str] = field(default_factory=list)  # what the user should know (a lost batch, ...)


class BatchPool:
    def __init__(self, live: Provider, api: BatchAPI, journal: BatchJournal, *, run_tag: str = "",
                 settle_s: float = 0.5, poll_s: tuple[float, float] = (1.0, 30.0), wait: bool = True,
                 timeout_s: float | None = None, cost_of: CostOf | None = None,
                 budget_left: Callable[[], float | None] | None = None, token_budget: int | None = None,
                 tokens_of: TokensOf | None = None) -> None:
        self.spec = live.spec
        self._live = live
        self.api = api
        self.journal = journal
        self.run_tag = run_tag
        self.settle_s = settle_s
        self.poll_s = poll_s
        self.wait = wait
        self.timeout_s = timeout_s  # --batch-timeout: how long this run waits, from its first request
        self._deadline: float | None = None
        # --max-cost: each line's worst-case cost is reserved when its batch is submitted (a batch is paid
        # whole, so the check is made then) and released when its answer is in (the meter has it then)
        self.cost_of, self.budget_left = cost_of, budget_left
        self._costs: dict[str, float] = {}
        self._reserved: dict[str, float] = {}
        self.stats = PoolStats()
        self._forming: list[BatchLine] = []
        self._forming_bytes = 0
        self._forming_waiters: dict[str, asyncio.Future[Response]] = {}
        self._settle: asyncio.TimerHandle | None = None
        self._results: dict[str, asyncio.Task[dict[str, Response]]] = {}  # tag -> the batch's answers
        self._used: dict[str, set[str]] = {}  # custom id -> tags whose answer for it was handed out
        self.intents = Intents(api, journal, self.stats.notes, poll_s)  # batches an earlier run did not record
        self._submits: set[asyncio.Task[None]] = set()
        # --batch-tokens: the provider's enqueued-token limit. No batch holds more, and a batch is submitted
        # only when the batches this run has waiting leave room for it (one at a time when one fills it)
        self.token_budget, self.tokens_of = token_budget, tokens_of
        self._tokens: dict[str, int] = {}  # custom id -> its input tokens
        self._forming_tokens = 0
        self._enqueued = 0  # input tokens of this run's batches submitted and not ended
        self._batch_tokens: dict[str, int] = {}  # tag -> its input tokens, while it counts as enqueued
        self._room: asyncio.Condition | None = None

    def status_line(self) -> str | None:
        """For the live display: batches, lines waiting, and the providers' own words for their state."""
        if not self.stats.batches and not self.stats.pending:
            return None
        states = sorted(set(self.stats.states.values()))
        unconfirmed = self.intents.unconfirmed
        return (f"batches {len(self.stats.states) or self.stats.batches} · waiting {self.stats.pending:,}"
                + (f" · failed {self.stats.failed:,}" if self.stats.failed else "")
                + (f" · {'/'.join(states)}" if states else "")
                + (f" · {unconfirmed} unrecorded batch(es) checked when they end" if unconfirmed else ""))

    def describe_params(self, params: GenParams) -> dict:
        return self._live.describe_params(params)  # type: ignore[attr-defined]

    # ---- one request -------------------------------------------------------------------
    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        if self._deadline is None and self.timeout_s is not None:
            self._deadline = time.monotonic() + self.timeout_s
        await self.intents.reconcile()
        line = self.api.line(messages, params, images)
        tag = self._open_batch_for(line.custom_id)
        if tag is None and self.intents.undecided(line.custom_id):
            await self._decided(line.custom_id)  # an earlier run's batch may hold it: known once it ends
            tag = self._open_batch_for(line.custom_id)
        if tag is not None:
            return await self._answer_from(tag, line.custom_id)
        if self.cost_of is not None:
            self._costs[line.custom_id] = self.cost_of(messages, params, images)
        if self.token_budget is not None and self.tokens_of is not None:
            self._tokens[line.custom_id] = self.tokens_of(messages, params, images)
        return await self._join(line)

    def _open_batch_for(self, cid: str) -> str | None:
        """The newest batch of this run directory holding `cid` whose answer was not handed out yet."""
        used = self._used.get(cid, set())
        tags = [t for t, b in self.journal.batches.items() if b.open and b.batch_id and cid in b.custom_ids
                and t not in used]
        return tags[-1] if tags else None

    async def _answer_from(self, tag: str, cid: str) -> Response:
        self._used.setdefault(cid, set()).add(tag)
        task = self._results.get(tag)
        if task is None:
            self.stats.resumed += 1
            task = self._results[tag] = asyncio.ensure_future(self._collect(tag))
        self.stats.pending += 1
        try:
            left = None if self._deadline is None else self._deadline - time.monotonic()
            if not task.done() and (not self.wait or (left is not None and left <= 0)):
                status = await self._status(tag)  # ended meanwhile? then it is collected now
                if status is None or status.state == "running":
                    raise NotWaiting(cid)
            try:
                answers = await asyncio.wait_for(asyncio.shield(task), left if left is None or left > 0 else None)
            except asyncio.TimeoutError:  # --batch-timeout: left for a later run (or --batch-fallback live)
                raise NotWaiting(cid) from None
        except (ProviderError, NotWaiting):  # not read (yet): a retry or a later run reads them again
            if isinstance(self._results.get(tag), asyncio.Task) and self._results[tag] is task and task.done():
                del self._results[tag]
            self._used[cid].discard(tag)
            raise
        finally:
            self.stats.pending -= 1
        self._reserved.pop(cid, None)
        response = answers.get(cid)
        if response is None:  # the batch ended without this line (expired, cancelled, lost)
            b = self.journal.batches[tag]
            response = Response(error="transient", error_message=f"batch {b.batch_id} {b.state} without this answer")
        if response.ok:
            self.stats.done += 1
            return replace(response, via="batch")
        self.stats.failed += 1
        raise ProviderError(response.error or "transient", response.error_message or "failed in a batch")

    async def _join(self, line: BatchLine) -> Response:
        """Add the line to the batch being formed (or to its twin already there) and wait for it."""
        waiter = self._forming_waiters.get(line.custom_id)
        if waiter is None:
            limits = self.api.limits
            tokens = self._tokens.get(line.custom_id, 0)
            if self._forming and (len(self._forming) >= limits.max_requests
                                  or self._forming_bytes + line.size > limits.max_bytes - ENVELOPE_BYTES
                                  or (self.token_budget is not None
                                      and self._forming_tokens + tokens > self.token_budget)):
                self._seal()
            waiter = asyncio.get_running_loop().create_future()
            self._forming.append(line)
            self._forming_bytes += line.size
            self._forming_tokens += tokens
            self._forming_waiters[line.custom_id] = waiter
            if self._settle is not None:
                self._settle.cancel()
            self._settle = asyncio.get_running_loop().call_later(self.settle_s, self._seal)
        tag = await asyncio.shield(waiter)  # resolves to the tag of the batch the line went into
        if isinstance(tag, BaseException):
            raise tag
        return await self._answer_from(tag, line.custom_id)

    # ---- batches -----------------------------------------------------------------------
    def _seal(self) -> None:
        """Submit the batch being formed (in the background; its lines wait on their futures)."""
        if self._settle is not None:
            self._settle.cancel()
            self._settle = None
        if not self._forming:
            return
        lines, waiters = self._forming, self._forming_waiters
        self._forming, self._forming_bytes, self._forming_waiters, self._forming_tokens = [], 0, {}, 0
        lines = self._affordable(lines, waiters)
        tokens = sum(self._tokens.pop(x.custom_id, 0) for x in lines)
        if not lines:
            return
        task = asyncio.ensure_future(self._submit(lines, waiters, tokens))
        self._submits.add(task)
        task.add_done_callback(self._submits.discard)

    def _affordable(self, lines: list[BatchLine], waiters: dict[str, asyncio.Future[Any]]) -> list[BatchLine]:
        """The lines whose worst-case cost fits what --max-cost leaves (counting what submitted batches may
        still cost); the others are not sent (the run is incomplete, resumable)."""
        left = self.budget_left() if self.budget_left is not None else None
        if left is None:
            return lines
        left -= sum(self._reserved.values())
        kept: list[BatchLine] = []
        for x in lines:
            cost = self._costs.pop(x.custom_id, 0.0)
            if cost <= left:
                left -= cost
                self._reserved[x.custom_id] = cost
                kept.append(x)
            else:
                self.stats.over_budget += 1
                waiters.pop(x.custom_id).set_result(NotSent(x.custom_id))
        return kept

    async def _make_room(self, tokens: int) -> bool:
        """Wait until the batches waiting at the provider leave room for `tokens` (a batch alone always fits),
        then count them as enqueued; False without waiting (--no-wait) when there is no room now."""
        if self.token_budget is None or not tokens:
            return True
        if self._room is None:
            self._room = asyncio.Condition()
        async with self._room:
            while self._enqueued and self._enqueued + tokens > self.token_budget:
                if not self.wait:
                    return False
                await self._room.wait()
            self._enqueued += tokens
        return True

    async def _leave_room(self, tag: str) -> None:
        """The batch ended (or was never created): its tokens no longer count against the limit."""
        tokens = self._batch_tokens.pop(tag, 0)
        if tokens and self._room is not None:
            async with self._room:
                self._enqueued -= tokens
                self._room.notify_all()

    async def _submit(self, lines: list[BatchLine], waiters: dict[str, asyncio.Future[Any]], tokens: int = 0) -> None:
        if not await self._make_room(tokens):  # --no-wait and the limit is full: a later run submits them
            for x in lines:
                if not (w := waiters[x.custom_id]).done():
                    w.set_result(NotSent(x.custom_id))
            return
        tag = f"evalkit-{self.run_tag}-{uuid.uuid4().hex[:12]}" if self.run_tag else f"evalkit-{uuid.uuid4().hex}"
        self._batch_tokens[tag] = tokens
        outcome: Any = tag
        try:
            await asyncio.to_thread(self.journal.intent, tag, self.api.provider, [x.custom_id for x in lines])
            try:
                batch_id = await self.api.submit(lines, tag)
            except ProviderError as e:  # did it arrive anyway? the provider's list says
                batch_id = await self._arrived(tag, e)
            if batch_id is not None:
                await asyncio.to_thread(self.journal.submitted, tag, batch_id)
            self.stats.batches += 1
        except BaseException as e:  # noqa: BLE001 - every waiting line gets this batch's error
            outcome = e if isinstance(e, (ProviderError, NotSent)) else ProviderError(
                "transient", f"batch not created: {e}")
            await self._leave_room(tag)
        for w in waiters.values():
            if not w.done():
                w.set_result(outcome)

    async def _arrived(self, tag: str, error: ProviderError) -> str | None:
        """After a failed create: the batch's id if the provider has it after all (None: recorded already, found
        later); else the intent is lost and `error` raised. When the list cannot tell yet (no tag on the batch
        and a candidate still running, or the list did not answer) the lines wait for it; with --no-wait they
        are left, and the intent with them, for the next run."""
        try:
            found = await self.intents.find(tag)
        except (BatchUndecided, ProviderError) as e:
            if not self.wait:
                raise NotWaiting(tag) from None
            if await self.intents.decide(tag, e.candidates if isinstance(e, BatchUndecided) else ()):
                return None
            raise error from None
        if not await self.intents.record(tag, found):
            raise error
        return found[0].id

    async def _decided(self, cid: str) -> None:
        """Wait until every intent that may hold `cid` is decided; NotWaiting with --no-wait or past
        --batch-timeout (the intent stays: a later run finds out), a permanent error as the line's own."""
        self.stats.pending += 1
        try:
            for tag in self.intents.undecided(cid):
                task = self.intents.deciding[tag]
                if not task.done():
                    left = None if self._deadline is None else self._deadline - time.monotonic()
                    if not self.wait or (left is not None and left <= 0):
                        raise NotWaiting(cid)
                    try:
                        await asyncio.wait_for(asyncio.shield(task), left)
                    except asyncio.TimeoutError:
                        raise NotWaiting(cid) from None
                task.result()
        finally:
            self.stats.pending -= 1

    async def _status(self, tag: str) -> BatchStatus | None:
        """The batch's state now (recorded); None when the provider no longer knows it (then lost)."""
        b = self.journal.batches[tag]
        assert b.batch_id is not None
        try:
            status = await self.api.status(b.batch_id)
        except BatchGone:
            self.stats.notes.append(f"batch {b.batch_id} is no longer known to {self.api.provider}: "
                                    f"its {len(b.custom_ids)} requests are submitted again")
            await asyncio.to_thread(self.journal.lost, tag)
            return None
        self.stats.states[b.batch_id] = status.provider_state or status.state
        await asyncio.to_thread(self.journal.state, b.batch_id, status.state, provider_state=status.provider_state,
                                done=status.done, failed=status.failed)
        return status

    async def _collect(self, tag: str) -> dict[str, Response]:
        """Poll the batch until it ends (backing off to poll_s[1]), then read its answers."""
        delay = self.poll_s[0]
        while True:
            status = await self._status(tag)
            if status is None or status.state != "running":
                await self._leave_room(tag)  # no longer queued at the provider: the next batch may go
            if status is None:
                return {}
            if status.state != "running":
                break
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.poll_s[1])
        if status.state == "failed":
            return {}
        try:
            return await self.api.results(status.id)
        except ProviderError:
            if status.state == "ended":
                raise
            return {}  # an expired or cancelled batch may have no results to read

    async def close(self) -> None:
        """Stop polling (the batches keep running at the provider; the next run collects them)."""
        if self._settle is not None:
            self._settle.cancel()
        for task in [*self._results.values(), *self._submits]:
            task.cancel()
        await asyncio.gather(*self._results.values(), *self._submits, return_exceptions=True)
        await self.intents.close()
