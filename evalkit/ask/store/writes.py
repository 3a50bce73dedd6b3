"""Answers on their way into the cache, written in batches (group commit)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from evalkit.core.errors import RunError


class CacheWriteError(RunError):
    """The cache could not store answers (a full disk, a folder gone read-only): the run stops sending;
    the answers are in the records. `where` names the file, `reason` is the system's words."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"cannot write {where}: {reason}")
        self.where, self.reason = where, reason


def _write_failure(cache: Any, e: Exception) -> Exception:
    """A failure of the disk as a CacheWriteError naming the cache file; anything else (a bug) as it is."""
    if not (isinstance(e, OSError) or type(e).__module__ == "sqlite3"):  # sqlite3 named, not imported
        return e
    folder = getattr(cache, "directory", "")
    where = f"{folder}/cache.db" if folder else "the response cache"
    reason = (e.strerror or str(e)) if isinstance(e, OSError) else str(e)
    return CacheWriteError(where, reason)


class CacheOwner(Protocol):
    """What the writer needs of the runner: its cache, and the thread that cache work runs on."""

    cache: Any

    def in_cache_thread(self, fn: Callable[..., Any], *args: object) -> Awaitable[Any]: ...


class CacheWrites:
    """Answers on their way into the cache: whatever arrives while one batch is being written
    goes in the next, each batch in one thread hop and one transaction (group commit). put()
    waits until its answer is stored; put_then() returns at once and calls `then` (with the
    write's error, if any) once it is.

    In run() the sink gets an answer as soon as it arrives (the spending budget sees it at once)
    and its store follows within a batch, milliseconds later: well inside the 100 ms for which
    the run directory buffers the record (rundir/layout.py). What a SIGKILL catches between the two is
    in the run directory's received.jsonl, written before either (ask/store/received.py)."""

    def __init__(self, runner: CacheOwner):
        self._runner = runner
        self._cache = runner.cache
        self._batch: list[tuple[str, dict, asyncio.Future[None] | None,
                                Callable[[BaseException | None], None] | None]] = []
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def _enqueue(self, key: str, value: dict, fut: asyncio.Future[None] | None,
                 then: Callable[[BaseException | None], None] | None) -> None:
        self._batch.append((key, value, fut, then))
        self._idle.clear()
        if self._task is None:
            self._task = asyncio.ensure_future(self._drain())

    async def put(self, key: str, value: dict) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(key, value, fut, None)
        await asyncio.shield(fut)

    def put_then(self, key: str, value: dict, then: Callable[[BaseException | None], None]) -> None:
        self._enqueue(key, value, None, then)

    async def idle(self) -> None:
        """Until every answer handed over is stored and its `then` called."""
        await self._idle.wait()

    def _write(self, items: list[tuple[str, dict]]) -> None:
        set_many = getattr(self._cache, "set_many", None)
        if set_many is not None:
            set_many(items)
        else:
            for key, value in items:
                self._cache.set(key, value)

    async def _drain(self) -> None:
        try:
            while self._batch:
                batch, self._batch = self._batch, []
                error: Exception | None = None
                try:
                    await self._runner.in_cache_thread(self._write, [(k, v) for k, v, _, _ in batch])
                except Exception as e:  # every answer of the batch learns it; the records keep them
                    error = _write_failure(self._cache, e)
                for _, _, fut, then in batch:
                    if fut is not None and not fut.done():
                        if error is None:
                            fut.set_result(None)
                        else:
                            fut.set_exception(error)
                    if then is not None:
                        then(error)
        finally:
            self._task = None
            if not self._batch:
                self._idle.set()
