"""The simulated server's batches: what was submitted, when it ends, and each line's answer.

One store per server holds the batches of all three APIs (their routes are in batch_routes.py).
A batch is `running` until its completion delay has passed since creation (or while frozen), then
every line is answered at once by the same simulated model as a live request with that body —
counted as a completion like a live answer, so "every query answered exactly once" can be checked
across live and batch. Knobs (BatchBehaviour): the delay, lines that fail (transiently or for good),
and expiry (a batch that ends without answers). Batches live in memory; a restarted server knows none.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class BatchBehaviour:
    delay_s: float = 0.0  # a batch stays in progress this long after its creation
    frozen: bool = False  # in progress until unfrozen (tests hold a batch pending)
    fail_ids: set[str] = field(default_factory=set)  # custom ids answered with a server error (transient)
    fail_first: int = 0  # the first N lines submitted (over all batches) fail transiently
    reject_ids: set[str] = field(default_factory=set)  # custom ids answered with a bad-request error
    expire: bool = False  # batches end as expired, without answers

    def update(self, d: dict[str, Any]) -> None:
        for name in ("delay_s", "frozen", "fail_first", "expire"):
            if name in d:
                setattr(self, name, type(getattr(self, name))(d[name]))
        for name in ("fail_ids", "reject_ids"):
            if name in d:
                setattr(self, name, set(d[name]))


# (custom id, outcome): outcome is ("ok", reply JSON) or ("error", status, message)
LineOutcome = tuple[str, tuple[Any, ...]]
Answerer = Callable[["SimBatch", str, dict[str, Any]], Awaitable[tuple[Any, ...]]]


@dataclass
class SimBatch:
    id: str
    api: str  # openai, anthropic, google
    lines: list[tuple[str, dict[str, Any]]]  # (custom id, request body)
    created: float
    tag: dict[str, Any] = field(default_factory=dict)  # OpenAI metadata, Gemini display name
    model: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # of the create request (Anthropic's version)
    cancelled: bool = False
    ended_at: float | None = None
    expired: bool = False
    results: list[LineOutcome] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # OpenAI: output/error file ids


class BatchStore:
    def __init__(self) -> None:
        self.batches: dict[str, SimBatch] = {}
        self.files: dict[str, bytes] = {}
        self.behaviour = BatchBehaviour()
        self.counts = {"batches": 0, "lines": 0, "answered": 0, "failed": 0}
        self._ids = itertools.count(1)
        self._lines_seen = 0

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def add(self, batch: SimBatch) -> SimBatch:
        self.batches[batch.id] = batch
        self.counts["batches"] += 1
        self.counts["lines"] += len(batch.lines)
        return batch

    def state(self, b: SimBatch) -> str:
        """running, ended, expired or cancelled (ended/expired only once settle() has run)."""
        if b.ended_at is not None:
            return "cancelled" if b.cancelled else "expired" if b.expired else "ended"
        return "running"

    def due(self, b: SimBatch) -> bool:
        return b.ended_at is None and (b.cancelled or (
            not self.behaviour.frozen and time.time() >= b.created + self.behaviour.delay_s))

    async def settle(self, b: SimBatch, answer: Answerer) -> None:
        """End the batch if its time has come: every line answered (or failed, expired, cancelled)."""
        if not self.due(b):
            return
        b.ended_at = time.time()
        if b.cancelled or self.behaviour.expire:
            b.expired = not b.cancelled
            b.results = [(cid, ("error", 0, "cancelled" if b.cancelled else "expired")) for cid, _ in b.lines]
            return
        for cid, body in b.lines:
            self._lines_seen += 1
            if cid in self.behaviour.fail_ids or self._lines_seen <= self.behaviour.fail_first:
                outcome: tuple[Any, ...] = ("error", 500, "simulated server error in batch")
            elif cid in self.behaviour.reject_ids:
                outcome = ("error", 400, "simulated invalid request in batch")
            else:
                outcome = await answer(b, cid, body)
            self.counts["answered" if outcome[0] == "ok" else "failed"] += 1
            b.results.append((cid, outcome))

    def counts_of(self, b: SimBatch) -> dict[str, int]:
        ok = sum(1 for _, o in b.results if o[0] == "ok")
        failed = len(b.results) - ok
        return {"total": len(b.lines), "succeeded": ok, "failed": failed,
                "processing": len(b.lines) - len(b.results)}
