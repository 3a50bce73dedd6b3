"""The run directory's journal of answers received (received.jsonl): a SIGKILL loses no answer the kernel holds.

records.jsonl is written in 100 ms groups and the cache in group commits, so a process killed
between an answer's arrival and those writes used to lose it, and the next run paid for it again.
The runner hands each answer it will store (key and cache value) to `ReceivedJournal.add` before it
does anything else with it: one line, one os.write on a file opened O_APPEND, no fsync. A killed
process's writes are in the kernel's page cache already, so only an answer still on the wire is lost;
a power cut may still lose the last seconds (the page cache is not flushed to the disk).

On the next run `replay` hands the journal's answers to the cache (to the persistent cache those it
lacks, or, under --no-cache, an overlay in front of it), so the usual lookup finds them and they are
recorded without being asked again. A run that ends with every answer in records.jsonl removes the
journal (engine/evaluate.py).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.ask.store.cache import CacheLike, NullCache


class ReceivedJournal:
    """Append-only lines {"key": request key, "value": cache value}, one per answer received."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self.broken: OSError | None = None  # a failed write (a full disk): journaling stops, the run goes on

    def add(self, key: str, value: dict[str, Any]) -> None:
        """Append one answer: one write syscall, reaching the kernel before this returns. A failure turns
        the journal off (the records and the cache still keep the answer, as before the journal)."""
        if self.broken is not None:
            return
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, line.encode("utf-8", "surrogatepass"))
        except OSError as e:
            self.broken = e

    def entries(self) -> dict[str, dict[str, Any]]:
        """What an earlier process journaled: key -> value; a torn or damaged line is skipped."""
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return {}
        found: dict[str, dict[str, Any]] = {}
        for line in raw.splitlines():
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                entry = json.loads(line)
                if isinstance(entry, dict) and isinstance(entry.get("key"), str) and isinstance(entry.get("value"), dict):
                    found[entry["key"]] = entry["value"]
        return found

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class Replayed:
    """A cache that does not keep answers (--no-cache) with the journal's answers in front of it."""

    def __init__(self, inner: CacheLike, answers: dict[str, dict[str, Any]]):
        self._inner = inner
        self._answers = answers
        self.blocking = inner.blocking

    def get(self, key: str) -> dict[str, Any] | None:
        hit = self._answers.get(key)
        return hit if hit is not None else self._inner.get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found = {k: v for k in keys if (v := self._answers.get(k)) is not None}
        rest = [k for k in keys if k not in found]
        if rest:
            found.update(self._inner.get_many(rest))  # type: ignore[attr-defined]
        return found

    def __getattr__(self, name: str) -> Any:  # set, set_many, stats, clear, close, hits, directory...
        return getattr(self._inner, name)


def replay(journal: ReceivedJournal, cache: CacheLike) -> CacheLike:
    """The cache a resumed run looks answers up in: the journal's answers included. A persistent cache
    is given those it lacks (they were paid for); a cache that keeps nothing gets the overlay."""
    answers = journal.entries()
    if not answers:
        return cache
    if isinstance(cache, NullCache):  # --no-cache: keeps nothing
        return Replayed(cache, answers)
    get_many = getattr(cache, "get_many", None)
    have = get_many(list(answers)) if get_many is not None else {k: v for k in answers if (v := cache.get(k))}
    missing = [(k, v) for k, v in answers.items() if k not in have]
    if missing:
        set_many = getattr(cache, "set_many", None)
        if set_many is not None:
            set_many(missing)
        else:
            for key, value in missing:
                cache.set(key, value)
    return cache
