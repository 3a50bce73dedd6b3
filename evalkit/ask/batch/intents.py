"""Batches an earlier run asked for but did not record: which one holds their lines, if any.

A batch's intent (tag and custom ids) is in the journal before the provider is asked, its id only
after; a kill between the two leaves an intent without an id. The provider's list tells whether the
batch was created — never by submitting again: found, it is recorded and its lines are answered from
it; not created, the intent is lost and its lines are free to be submitted.

Where the provider keeps no tag on a batch (Anthropic's Message Batches take only their requests),
the list cannot say whose a batch is while it runs: another run of the same account may have one
with as many requests. Its lines then wait (BatchUndecided) until the batches that may hold them have
ended, and are taken from one only if its results hold exactly them. So does an intent whose lookup
failed for a reason worth another try (the list did not answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from evalkit.ask.batch.journal import BatchJournal
from evalkit.core.errors import ProviderError
from evalkit.providers.batch_api import BatchAPI, BatchStatus, BatchUndecided


class Intents:
    """The intents of one run directory that an earlier run left without a batch id, found out once per
    run; those that cannot be told yet are polled in the background (backing off to poll_s[1])."""

    def __init__(self, api: BatchAPI, journal: BatchJournal, notes: list[str],
                 poll_s: tuple[float, float] = (1.0, 30.0)) -> None:
        self.api, self.journal, self.notes, self.poll_s = api, journal, notes, poll_s
        self._lock: asyncio.Lock | None = None
        self._done = False
        self.deciding: dict[str, asyncio.Task[bool]] = {}  # tag -> finding out (True: recorded; False: lost)
        self._by_id: dict[str, list[str]] = {}  # custom id -> the undecided intents holding it
        self._candidates: dict[str, tuple[str, ...]] = {}  # tag -> batches that may be its, not ended

    def undecided(self, cid: str) -> list[str]:
        """The intents not decided yet that hold `cid` (its line must not be submitted meanwhile)."""
        return list(self._by_id.get(cid, ()))

    @property
    def unconfirmed(self) -> int:
        """Batches that may be an intent's, waited for (for the live display)."""
        return len({c for ids in self._candidates.values() for c in ids})

    async def reconcile(self) -> None:
        """Once per run, before the first line: each intent an earlier run left is recorded, lost, or
        decided in the background."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._done:
                return
            for tag, b in list(self.journal.batches.items()):
                if b.state == "intent":
                    try:
                        found = await self.find(tag)
                    except BatchUndecided as undecided:
                        self.decide(tag, undecided.candidates)
                        continue
                    except ProviderError:
                        self.decide(tag, ())
                        continue
                    await self.record(tag, found)
            self._done = True

    async def find(self, tag: str) -> list[BatchStatus]:
        b = self.journal.batches[tag]
        return await self.api.find(tag, b.custom_ids, b.since)

    async def record(self, tag: str, found: Sequence[BatchStatus]) -> bool:
        """Found: the batch id is recorded (True); else the intent is lost, its lines free (False)."""
        if found:
            await asyncio.to_thread(self.journal.submitted, tag, found[0].id)
            return True
        await asyncio.to_thread(self.journal.lost, tag)
        return False

    def decide(self, tag: str, candidates: Sequence[str]) -> asyncio.Task[bool]:
        """Find out in the background which batch holds the intent `tag`; its lines wait for the task."""
        n = len(self.journal.batches[tag].custom_ids)
        if candidates:
            self._candidates[tag] = tuple(candidates)
            self.notes.append(
                f"{n:,} requests were being submitted when a run stopped before recording their batch; "
                f"{self.api.provider} batches carry no tag, so batch(es) {', '.join(candidates)} are taken for "
                "theirs only once ended and only if their results hold exactly these requests (nothing is "
                "submitted again meanwhile)")
        for cid in self.journal.batches[tag].custom_ids:
            self._by_id.setdefault(cid, []).append(tag)
        task = self.deciding[tag] = asyncio.ensure_future(self._decide(tag))
        return task

    async def _decide(self, tag: str) -> bool:
        """Ask again until the provider can tell. A permanent error (a revoked key) ends the wait: the lines
        fail with it, and the intent stays for a later run."""
        delay = self.poll_s[0]
        n = len(self.journal.batches[tag].custom_ids)
        try:
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, self.poll_s[1])
                try:
                    found = await self.find(tag)
                except BatchUndecided as undecided:
                    self._candidates[tag] = undecided.candidates
                    continue
                except ProviderError as e:
                    if e.retryable:
                        continue
                    raise
                waited = tag in self._candidates
                recorded = await self.record(tag, found)
                if recorded and waited:
                    self.notes.append(f"batch {found[0].id} ended holding exactly the {n:,} requests of the "
                                      "unrecorded batch: their answers are collected from it")
                elif waited:
                    self.notes.append(f"no batch holds exactly the {n:,} requests of the unrecorded batch "
                                      "(it was never created): they are submitted now")
                return recorded
        finally:
            self._candidates.pop(tag, None)
            for cid in self.journal.batches[tag].custom_ids:
                tags = self._by_id.get(cid, [])
                if tag in tags:
                    tags.remove(tag)

    async def close(self) -> None:
        for task in self.deciding.values():
            task.cancel()
        await asyncio.gather(*self.deciding.values(), return_exceptions=True)
