"""The response cache: a JSON-only disk store of answers under content-addressed keys
(ask/request_key.py).

Values are JSON text in diskcache's sqlite file, never pickle: a cache directory shared or
copied between machines must not be able to run code when read. Each is sealed to its key
(ask/store/seal.py): an entry that does not match its key is a miss, counted in `rejected`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from evalkit.ask.request_key import canonical_json
from evalkit.ask.store.seal import CacheSeal, unsealed
from evalkit.core.errors import EvalkitError
from evalkit.core.files import environment_error

# Values up to this size stay inline in cache.db (as TEXT); diskcache's default (32 KB)
# would move long answers to side files. Larger ones still go to side files as UTF-8 text.
_INLINE_MAX = 1 << 24
_MANY = 500  # keys per SELECT of get_many (SQLite allows 999 parameters in old builds)


def _value_text(value: dict[str, Any]) -> str:
    """The JSON text stored for a value; TypeError for anything that would not round-trip."""
    if not isinstance(value, dict):
        raise TypeError(f"cache values must be dicts, got {type(value).__name__}")
    try:
        return canonical_json(value)
    except ValueError as e:  # NaN/inf or a circular reference: not portable JSON
        raise TypeError(f"cache value is not JSON-serialisable: {e}") from e


@dataclass(frozen=True)
class CacheStats:
    """What `evalkit cache stats` prints."""

    entries: int
    size_bytes: int
    directory: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CacheLike(Protocol):
    """What the runner needs from a cache; ResponseCache and NullCache both provide it.

    Optional, used when present: get_many(keys) and set_many(items) (batched lookups and group
    commits), `executor` (the cache's own thread for blocking work; see ResponseCache) and `rejected`
    (request keys whose entry did not match them, ask/store/seal.py: misses, asked again)."""

    hits: int
    misses: int
    blocking: bool  # True when get/set touch the disk (the runner then calls them from a thread)

    def get(self, key: str) -> dict[str, Any] | None: ...

    def set(self, key: str, value: dict[str, Any]) -> None: ...

    def stats(self) -> CacheStats: ...

    def clear(self) -> int: ...

    def close(self) -> None: ...


def _quick_check(cache: Any) -> None:
    """sqlite's structural check of every page (`PRAGMA quick_check`: ~60 ms for 20,000 answers, 14 MB).
    A damaged page in the middle of cache.db reads as a miss until a write reaches it, so the run would
    pay again for what the cache held and then fail on storing it: the damage must show before anything
    is sent."""
    rows = cache._sql("PRAGMA quick_check").fetchall()
    if [tuple(r) for r in rows] != [("ok",)]:  # the first finding, on one line ("*** in database main ***\n…")
        first = str(rows[0][0]).replace("*** in database main ***", "") if rows else "no answer"
        raise sqlite3.DatabaseError("quick_check: " + " ".join(first.split()))


def _not_writable(directory: Path) -> str | None:
    """Why sqlite cannot write in the cache folder (read-only, no permission), or None when it can:
    a file is made there and removed, as sqlite makes its journal."""
    probe = directory / f".evalkit-write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return None
    except OSError as e:
        return f"cache directory {directory} is not writable ({e.strerror or e})"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    db = directory / "cache.db"
    if db.exists() and not os.access(db, os.W_OK):
        return f"cache {db} is not writable (read-only file)"
    return None


def _open(directory: Path, make: Callable[[], Any]) -> Any:
    """The cache, or a one-line error with the remedy: a failure here fails again on every re-run, so
    it is an input error (exit 2), not a resumable one."""
    if directory.exists() and not directory.is_dir():
        raise EvalkitError(f"cache directory {directory} is a file (give --cache-dir a folder)")
    cache = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        cache = make()
        cache.volume()  # reads the database once: damage shows here, not mid-run
        _quick_check(cache)
        return cache
    except PermissionError as e:
        raise EvalkitError(f"cache directory {directory} is not writable ({e.strerror}); "
                           "give --cache-dir a writable folder or use --no-cache") from e
    except sqlite3.DatabaseError as e:
        if cache is not None:
            with contextlib.suppress(Exception):
                cache.close()
        refused = _not_writable(directory)  # sqlite says "unable to open database file": not damage
        if refused is not None:
            raise EvalkitError(f"{refused}; give --cache-dir a writable folder or use --no-cache") from e
        full = environment_error(e)  # a full disk reads as an I/O error, not as damage
        raise EvalkitError(full or f"cache {directory / 'cache.db'} is damaged ({e}); run `evalkit cache verify "
                           f"--repair --cache-dir {directory}` (it keeps every answer still readable), move it "
                           "away (a new one is made) or use --no-cache") from e
    except OSError as e:
        raise EvalkitError(f"cannot open cache directory {directory}: {e.strerror or e}; "
                           "give --cache-dir another folder or use --no-cache") from e


class ResponseCache:
    """diskcache.Cache with values stored as JSON text (never pickle).

    Safe across threads and processes as diskcache is; hits/misses count this object's get()
    calls, for the run summary.
    """

    blocking = True

    def __init__(self, directory: str | Path, seal: CacheSeal | None = None):
        import diskcache

        from evalkit.ask.store.textdisk import TextOnlyDisk

        self.directory = Path(directory).expanduser()
        self._cache = _open(self.directory, lambda: diskcache.Cache(
            str(self.directory), disk=TextOnlyDisk, disk_min_file_size=_INLINE_MAX))
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self.hits = 0
        self.misses = 0
        self.seal = seal or CacheSeal()
        self.rejected_keys: set[str] = set()

    @property
    def rejected(self) -> int:
        return len(self.rejected_keys)

    def _served(self, key: str, text: object) -> dict[str, Any] | None:
        """The entry's value when it may be served: JSON text of an object, sealed to `key` (or 0.1-0.3's,
        unless only signed entries may be). A refused entry is noted in `rejected_keys`."""
        if not isinstance(text, str):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        if self.seal.refusal(key, value, text) is not None:
            with self._lock:
                self.rejected_keys.add(key)
            return None
        return unsealed(value)

    def _count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response dict, or None (a corrupt or foreign entry counts as a miss)."""
        try:
            text = self._cache.get(key, default=None, retry=True)
        except (TypeError, OSError, sqlite3.Error):
            text = None
        value = self._served(key, text)
        if value is None:
            self._count(False)
            return None
        self._count(True)
        return value

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """{key: value} for those keys that hold a response, in one SQL query per _MANY keys (the
        runner's batched lookup); hits and misses count as with get(). Entries that do not parse
        count as misses, and so do entries not sealed to their key. Falls back to get() per key if
        diskcache's table is not as expected."""
        try:
            found = self._select_many(keys)
        except (AttributeError, KeyError, TypeError, ValueError, OSError, sqlite3.Error):
            return {k: v for k in keys if (v := self.get(k)) is not None}
        with self._lock:
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def _select_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """diskcache.Cache.get's fast path (no statistics, no access-time update) for many keys."""
        cache = self._cache
        if cache.statistics or cache.eviction_policy not in ("least-recently-stored", "none"):
            raise TypeError("get() updates the table on read: no batched path")
        now = time.time()
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(keys), _MANY):
            part = list(keys[i:i + _MANY])
            if any(type(k) is not str for k in part):
                raise TypeError("cache keys must be str")
            marks = ",".join("?" * len(part))
            rows = cache._sql(f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})"
                              " AND (expire_time IS NULL OR expire_time > ?)", (*part, now)).fetchall()
            for key, mode, filename, db_value in rows:
                try:
                    text = cache.disk.fetch(mode, filename, db_value, False)
                except (OSError, TypeError, ValueError):
                    continue
                value = self._served(key, text)
                if value is not None:
                    out[key] = value
        return out

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Store a JSON-serialisable dict, sealed to its key; anything else raises TypeError before touching disk."""
        self._cache.set(key, self.seal.sealed_text(key, value), retry=True)

    def set_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """set() for several values in one transaction, so one commit (the runner's batched writes);
        every value is checked before anything is written."""
        # the last value of a repeated key wins
        self.set_texts({key: self.seal.sealed_text(key, value) for key, value in items})

    def set_texts(self, texts: Mapping[str, str]) -> None:
        """Entries stored as they are, already sealed or not (copied from a shared cache, kept by a repair):
        resealing would pass off an entry of 0.1-0.3, or one nobody checked, as this process's."""
        texts = dict(texts)
        try:
            self._insert_many(texts)
        except AttributeError:  # not the diskcache this was written against: its own set(), one by one
            with self._cache.transact(retry=True):
                for key, text in texts.items():
                    self._cache.set(key, text, retry=True)

    def _insert_many(self, texts: dict[str, str]) -> None:
        """diskcache.Cache.set's own steps for many keys in one transaction: one SELECT for all of
        them and one cull (eviction to the size limit) per batch instead of one each per key."""
        cache = self._cache
        now = time.time()
        keys = list(texts)
        with cache._transact(retry=True) as (sql, cleanup):
            existing: dict[str, tuple[int, Any]] = {}
            for i in range(0, len(keys), _MANY):
                part = keys[i:i + _MANY]
                rows = sql(f"SELECT key, rowid, filename FROM Cache WHERE raw = 1 AND key IN "
                           f"({','.join('?' * len(part))})", part).fetchall()
                existing.update((key, (rowid, filename)) for key, rowid, filename in rows)
            for key, text in texts.items():
                db_key, _raw = cache._disk.put(key)
                columns = (None, None, *cache._disk.store(text, False, key=key))  # no expiry, no tag
                old = existing.get(key)
                if old is not None:
                    cleanup(old[1])
                    cache._row_update(old[0], now, columns)
                else:
                    cache._row_insert(db_key, True, now, columns)
            cache._cull(now, sql, cleanup)

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def stats(self) -> CacheStats:
        return CacheStats(
            entries=len(self._cache), size_bytes=int(self._cache.volume()), directory=str(self.directory)
        )

    def clear(self) -> int:
        """Remove every entry; returns how many were removed."""
        return int(self._cache.clear(retry=True))

    def claims(self, ttl_s: float) -> Any:
        """Claims on request keys for every process using this folder (evalkit.ask.claims)."""
        from evalkit.ask.claims import LocalClaims

        return RefusedUnclaimed(LocalClaims(self.directory, ttl_s, self.executor), self.rejected_keys)

    @property
    def executor(self) -> ThreadPoolExecutor:
        """One thread of the cache's own for the runner's blocking cache work (batched lookups and
        writes). sqlite connections are per thread and diskcache's outlive their thread until a
        garbage collection; close() closes this thread's connection in it, then stops it."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="evalkit-cache")
            return self._executor

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            with contextlib.suppress(Exception):
                executor.submit(self._cache.close).result()
            executor.shutdown(wait=True)
        self._cache.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RefusedUnclaimed:
    """Claims, but a key whose entry was refused is asked at once, unclaimed. A claim outlives its answer
    (for a while: whoever looked just before the answer was stored finds it then), so the claim of the
    process that stored the entry refused since would hold this one back until it lapsed, for nothing. Two
    processes refusing the same entry at once may then both ask it: the one case a query is paid twice."""

    def __init__(self, claims: Any, refused: set[str]) -> None:
        self._claims, self._refused = claims, refused

    def claim(self, key: str) -> bool:
        return key in self._refused or self._claims.claim(key)

    def __getattr__(self, name: str) -> Any:  # release, done, close, ttl_s: the claims' own
        return getattr(self._claims, name)


class NullCache:
    """--no-cache: the same interface, stores nothing; every get() is a miss."""

    directory = ""
    blocking = False
    rejected = 0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            self.misses += 1
        return None

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        with self._lock:
            self.misses += len(keys)
        return {}

    def set(self, key: str, value: dict[str, Any]) -> None:
        """Validates like ResponseCache.set (so --no-cache hides no bug), then drops the value."""
        _value_text(value)

    def set_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        for _key, value in items:
            _value_text(value)

    def stats(self) -> CacheStats:
        return CacheStats(entries=0, size_bytes=0, directory="")

    def clear(self) -> int:
        return 0

    def close(self) -> None:
        return None

    def __enter__(self) -> NullCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
