"""The runner's feed: queries in order, each with what the cache holds for it, a chunk at a time."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from evalkit.core.inline import inline_size
from evalkit.core.types import Query

LOOKUP_CHUNK = 512  # queries looked up in the cache per thread hop (the first chunks are smaller)
FIRST_CHUNK = 32
# images kept in a data file (spans) looked up ahead of sending, in bytes: hashing one for its key reads it,
# and it must still be in the image pipeline's span memo (SPAN_MEMO_BYTES) when it is sent, or it is read twice
LOOKAHEAD_SPAN_BYTES = 16 * 2**20

# What the feed found for one query: (request key, cached value or None, fingerprints of a hit),
# or None when the lookup failed for this query alone (ask() then reports the error itself).
Looked = tuple[str, dict | None, list[str]] | None


class Lookups(Protocol):
    """What the feed needs of the runner: a batched lookup, run on the cache's thread."""

    def lookup_many(self, queries: Sequence[Query]) -> list[Looked]: ...

    def in_cache_thread(self, fn: Callable[..., Any], *args: object) -> Awaitable[Any]: ...


class Feed:
    """The queries in order, each with what the cache holds for it, looked up a chunk at a time.

    One thread hop computes a chunk's keys and asks the cache for all of them at once
    (Runner.lookup_many); the next chunk is looked up while the workers drain this one, so
    they wait only at the start. Chunks grow from FIRST_CHUNK to LOOKUP_CHUNK queries.
    """

    def __init__(self, runner: Lookups, queries: Iterable[Query]):
        self._runner = runner
        self._it: Iterator[Query] = iter(queries)
        self._buf: deque[tuple[Query, Looked, int]] = deque()  # each with its span bytes (span_bytes)
        self._size = FIRST_CHUNK
        self._span_bytes = 0  # of the queries in _buf
        self._done = False
        self._filling: asyncio.Task[None] | None = None

    async def next(self) -> tuple[Query, Looked] | None:
        """The next query and its lookup; None when all were handed out."""
        while True:
            if (not self._done and self._filling is None and len(self._buf) <= self._size // 2
                    and self._span_bytes <= LOOKAHEAD_SPAN_BYTES // 2):
                self._filling = asyncio.ensure_future(self._fill())
            if self._buf:
                query, looked, weight = self._buf.popleft()
                self._span_bytes -= weight
                return query, looked
            if self._filling is None:
                return None
            await asyncio.shield(self._filling)

    async def _fill(self) -> None:
        try:
            chunk, weights, weight = [], [], 0
            for query in itertools.islice(self._it, self._size):
                chunk.append(query)
                weights.append(span_bytes(query))
                weight += weights[-1]
                if weight >= LOOKAHEAD_SPAN_BYTES:
                    break
            if not chunk:
                self._done = True
                return
            self._size = min(self._size * 2, LOOKUP_CHUNK)
            looked = await self._runner.in_cache_thread(self._runner.lookup_many, chunk)
            self._buf.extend(zip(chunk, looked, weights, strict=True))
            self._span_bytes += weight
        finally:
            self._filling = None

    async def aclose(self) -> None:
        task, self._filling = self._filling, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def span_bytes(query: Query) -> int:
    """The bytes of a query's images kept in a data file (core.inline.inline_size: no read)."""
    return sum(inline_size(p.ref) for p in query.image_parts() if p.ref.kind == "span")
