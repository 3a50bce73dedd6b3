"""What a provider's batch API must offer evalkit, and the documented limits of each one.

A batch adapter is as thin as a live one: it turns a request into the provider's batch line (the
same body a live call sends, so the answer is the same cache entry), submits and polls batches,
reads their results back as Responses, and finds batches by evalkit's tag. Everything else —
which requests to submit, waiting, resubmitting, recording — lives in `evalkit.ask.batch.pool`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from evalkit.core.types import GenParams, Message, Response
    from evalkit.images.pipeline import PreparedImage

# ended: every line has a result (some may have failed); the others end a batch without results
BatchState = Literal["running", "ended", "failed", "expired", "cancelled"]


@dataclass(frozen=True)
class BatchLimits:
    """Per-batch limits as the provider documents them (source and the date it was read); each provider's
    are in its record (evalkit.providers.registry)."""

    max_requests: int
    max_bytes: int
    source: str


# Room left in each batch for the envelope the provider adds around the lines (JSON framing).
ENVELOPE_BYTES = 64 * 1024


def custom_id(body: dict[str, Any]) -> str:
    """A line's id: a digest of its request body, so the same request has the same id in every
    process (a resumed run finds its pending lines) and fits all three providers' id rules."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return "ek-" + digest[:40]


@dataclass(frozen=True)
class BatchLine:
    """One request as a batch line: its id, the provider's request body, and its size in bytes."""

    custom_id: str
    body: dict[str, Any] = field(repr=False)
    size: int = 0

    @staticmethod
    def of(body: dict[str, Any]) -> BatchLine:
        return BatchLine(custom_id(body), body, len(json.dumps(body, separators=(",", ":"))))


@dataclass(frozen=True)
class BatchStatus:
    """A batch as the provider reports it: evalkit's state, the counts, and the provider's own word."""

    id: str
    state: BatchState
    total: int = 0
    done: int = 0
    failed: int = 0
    provider_state: str = ""
    tag: str | None = None


class BatchGone(Exception):
    """The provider no longer knows this batch (deleted, expired from its records, another account)."""


class BatchUndecided(Exception):
    """Whether the batch sought exists cannot be told yet: a provider that keeps no tag on a batch shows
    which lines it holds only in its results, and these batches (`candidates`, their ids) that may be it
    have not ended. Asked again once they have, find() answers."""

    def __init__(self, candidates: Sequence[str]) -> None:
        super().__init__(", ".join(candidates))
        self.candidates = tuple(candidates)


class BatchAPI(Protocol):
    provider: str
    limits: BatchLimits

    def line(self, messages: Sequence[Message], params: GenParams, images: Sequence[PreparedImage]) -> BatchLine:
        """The request as a batch line, with the body a live call would send."""
        ...

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        """Create one batch of `lines`, tagged with `tag`; returns the provider's batch id."""
        ...

    async def status(self, batch_id: str) -> BatchStatus:
        """The batch's state now; BatchGone when the provider does not know it."""
        ...

    async def results(self, batch_id: str) -> dict[str, Response]:
        """Each line's answer (or classified error) by custom id, for an ended batch."""
        ...

    async def find(self, tag: str, custom_ids: Sequence[str], since: float) -> list[BatchStatus]:
        """The provider's batches created since `since` (epoch s) that are the one evalkit tagged `tag`
        (by its metadata or name, or where the provider keeps no tag, by the custom ids of its results):
        reconciling a kill between the provider accepting a batch and evalkit recording its id. Never a
        batch merely like it: BatchUndecided while a batch that may be it has not ended."""
        ...

    async def cancel(self, batch_id: str) -> None:
        ...
