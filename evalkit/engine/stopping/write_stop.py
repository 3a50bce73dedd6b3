"""A run that could not write what it received (a full disk): stop sending, then say what was kept.

Asking on while nothing can be written pays for answers that a resume pays for again. So the first
failed write of records.jsonl (rundir.RunDir.write_error) or of the response cache
(ask.store.writes.CacheWriteError) stops new requests; the replies already on their way are
received and held in memory. When the asking is over, the records that could not be written are
tried once more (space may have been freed since); those that still cannot be are lost unless the
cache or received.jsonl (ask/store/received.py) holds their answers, and the one-line error (exit 2) says how
many of each.
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.ask.store.received import ReceivedJournal
from evalkit.ask.store.writes import CacheWriteError
from evalkit.core.errors import EvalkitError
from evalkit.rundir.layout import RECEIVED, RunDir


def _keys(lines: list[str]) -> list[str]:
    keys = []
    for line in lines:
        try:
            key = json.loads(line).get("request_key")
        except (ValueError, AttributeError):
            key = None
        keys.append(key if isinstance(key, str) else "")
    return keys


def _in_cache(cache: Any, keys: list[str]) -> set[str]:
    """The keys whose answers the cache holds (reading needs no space)."""
    wanted = [k for k in dict.fromkeys(keys) if k]
    if not wanted or not getattr(cache, "blocking", False):  # --no-cache keeps nothing
        return set()
    try:
        get_many = getattr(cache, "get_many", None)
        if get_many is not None:
            return set(get_many(wanted))
        return {k for k in wanted if cache.get(k) is not None}
    except Exception:  # noqa: BLE001 - an unreadable cache holds nothing we can count on
        return set()


class WriteStopped(EvalkitError):
    """The run stopped at a failed write after receiving answers: its folders are kept, never tidied
    away as those of a run that received nothing (the cache may hold the answers)."""


class WriteStop:
    """Around the asking: `stopped()` once a write failed (the runner's stop asks it), a
    CacheWriteError out of the runner held rather than raised, and `error()` once it is over."""

    def __init__(self, rundir: RunDir, cache: Any, received: ReceivedJournal | None = None):
        self.rundir, self.cache, self.received = rundir, cache, received
        self.cache_error: CacheWriteError | None = None

    def stopped(self) -> bool:
        return self.rundir.write_error is not None or self.cache_error is not None

    def __enter__(self) -> WriteStop:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, CacheWriteError):
            self.cache_error = exc
            return True
        return False

    def _journaled(self) -> set[str]:
        """The keys received.jsonl holds (its writes may have succeeded where the records' failed)."""
        if self.received is None or self.received.broken is not None:
            return set()
        return set(self.received.entries())

    def error(self) -> WriteStopped | None:
        """None when every write succeeded; else the one-line error for the first failed write, once
        the records still buffered have had their last try."""
        failed = self.rundir.write_error
        if failed is None and self.cache_error is None:
            return None
        head = (f"cannot write {self.rundir.records_path}: {failed.strerror or failed}" if failed is not None
                else str(self.cache_error))
        unwritten = self.rundir.give_up()
        if not unwritten:
            kept = "every answer received is in the records"
        else:
            keys = _keys(unwritten)
            cached = _in_cache(self.cache, keys) | self._journaled()
            saved = sum(k in cached for k in keys)
            kept = (f"{len(unwritten):,} answers received could not be written to the records: {saved:,} are "
                    f"in the response cache or {RECEIVED} (a resume takes them from there), {len(keys) - saved:,} "
                    "are lost (asked again on resume)")
        return WriteStopped(f"{head}; stopped sending; {kept}; free some space, then re-run the same command "
                            "to resume")
