"""A response cache shared by a team through Redis (`--cache-url redis://…`), the local disk cache in front.

Why Redis and not a cache folder on a shared drive: SQLite's write-ahead log does not work over a network
filesystem, and a cache that loses answers makes a team pay twice. Why this is simple: entries are
content-addressed (the key is the request's hash) and immutable, so they are written once with `SET NX`
and never locked, updated or invalidated. Values are the same JSON text as on disk (never pickle: a
shared cache must not be able to run code on whoever reads it), capped in size, sealed to their key
(ask/store/seal.py): an entry that does not match its key is a miss, and the answer asked again replaces
it (a plain SET: there, the first answer stored must not stand).

Reads go to the local cache first; what only Redis holds is copied to the local cache as it is read (the
next run on this machine needs no round trip). Writes go to both. A Redis that cannot be reached at the
start is one line and exit 2 before anything is sent; one that stops answering mid-run stops the run
(SharedCacheLost, exit 1: every answer received is in records.jsonl and the local cache, so the same
command resumes), or, with `--cache-fallback local`, the run goes on with the local cache alone and says so
once. The password never leaves this module: URLs are shown without it.

redis-py is imported only when a cache URL is given.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from evalkit.ask.store.cache import CacheStats, ResponseCache
from evalkit.ask.store.seal import (
    ALTERED,
    BADLY_SIGNED,
    SWAPPED,
    UNSIGNED,
    CacheSeal,
    audit,
    seal_counts,
    unsealed,
)
from evalkit.core.errors import EvalkitError, RunError
from evalkit.core.sdk import import_sdk

PREFIX = "evalkit:v1:response:"  # every key evalkit writes starts so: `cache clear` removes these only
MAX_VALUE_BYTES = 8 * 1024 * 1024  # a larger answer stays in the local cache only
CONNECT_TIMEOUT_S = 5.0
SOCKET_TIMEOUT_S = 30.0
_SCAN_COUNT = 1000


class SharedCacheLost(RunError):
    """Redis stopped answering mid-run: the run stops, resumable (every answer is recorded locally)."""

    exit_code = 1


def shown_url(url: str) -> str:
    """The URL without its password (`redis://:***@host:6379/0`): what may reach a console or a file."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}{port}", parts.path, parts.query, ""))


def check_url(url: str, flag: str = "--cache-url") -> str:
    """A redis:// or rediss:// URL with a host, else a one-line error (before anything is opened)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise EvalkitError(f"{flag} {shown_url(url)!r} is not a URL ({e})") from None
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise EvalkitError(f"{flag} {shown_url(url)!r}: expected redis://[:PASSWORD@]HOST:PORT/DB "
                           "(or rediss:// for TLS)")
    return url


class RedisStore:
    """The shared half: JSON texts under PREFIX in one Redis database, one round trip per batch."""

    def __init__(self, url: str, flag: str = "--cache-url") -> None:
        redis = import_sdk("redis", flag)  # lazy: only with --cache-url
        self.url = check_url(url, flag)
        self.shown = shown_url(url)
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        try:
            self.client = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                               socket_timeout=SOCKET_TIMEOUT_S, decode_responses=False)
            self.client.ping()
        except self._errors as e:
            raise EvalkitError(f"{flag}: cannot reach Redis at {self.shown} ({self._cause(e)}); start it, "
                               "fix the URL, or run without --cache-url") from None

    def _cause(self, error: BaseException) -> str:
        """The error without anything the URL carried (redis-py may quote it)."""
        text = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        password = urlsplit(self.url).password
        return text.replace(password, "***") if password else text

    def lost(self, error: BaseException) -> SharedCacheLost:
        return SharedCacheLost(f"the shared cache at {self.shown} stopped answering ({self._cause(error)}); every "
                               "answer received is recorded: re-run the same command to resume "
                               "(or add --cache-fallback local to go on without it)")

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return self._errors

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        if not keys:
            return {}
        values = self.client.mget([PREFIX + k for k in keys])
        return {k: v.decode("utf-8", "replace") for k, v in zip(keys, values, strict=True) if v is not None}

    def set_many(self, texts: dict[str, str], replace: frozenset[str] | set[str] = frozenset()) -> None:
        """Store texts: content-addressed, the first answer stored stands, except under the keys in
        `replace`, whose entries were refused (not sealed to their key): those are overwritten."""
        pipe = self.client.pipeline(transaction=False)
        for key, text in texts.items():
            data = text.encode("utf-8", "surrogatepass")
            if len(data) <= MAX_VALUE_BYTES:
                pipe.set(PREFIX + key, data, nx=key not in replace)
        pipe.execute()

    def keys(self) -> list[bytes]:
        return list(self.client.scan_iter(match=PREFIX + "*", count=_SCAN_COUNT))

    def clear(self) -> int:
        removed = 0
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=PREFIX + "*", count=_SCAN_COUNT):
            batch.append(key)
            if len(batch) >= _SCAN_COUNT:
                removed += int(self.client.unlink(*batch))
                batch = []
        if batch:
            removed += int(self.client.unlink(*batch))
        return removed

    def close(self) -> None:
        self.client.close()


class SharedCache:
    """CacheLike: the local ResponseCache in front of the shared store (None once --cache-fallback dropped it)."""

    blocking = True

    def __init__(self, local: ResponseCache, store: RedisStore, *, fallback: bool = False,
                 say: Callable[[str], None] = lambda line: None) -> None:
        self.local = local
        self.store: RedisStore | None = store
        self.shown = store.shown
        self._fallback = fallback
        self._say = say
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.remote_hits = 0  # answers only Redis held (copied to the local cache as they were read)
        self.refused: set[str] = set()  # keys whose Redis entry was refused: the next answer replaces it

    @property
    def seal(self) -> CacheSeal:
        return self.local.seal

    @property
    def rejected(self) -> int:
        """Request keys whose entry, here or in Redis, was not served for not matching them."""
        with self._lock:
            return len(self.local.rejected_keys | self.refused)

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found = self.local.get_many(keys)
        missing = [k for k in keys if k not in found]
        remote = self._remote(lambda store: store.get_many(missing)) if missing and self.store else None
        copied: dict[str, str] = {}
        refused: list[str] = []
        for key, text in (remote or {}).items():
            value = _parsed(text)
            if value is None or self.seal.refusal(key, value, text) is not None:
                refused.append(key)  # asked again; its answer replaces this entry
            else:
                found[key] = unsealed(value)
                copied[key] = text  # as it is: 0.1-0.3's entries stay unsealed
        if copied:
            self.local.set_texts(copied)  # the next run on this machine needs no round trip
        with self._lock:
            self.refused.update(refused)
            self.remote_hits += len(copied)
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    # -- writing ---------------------------------------------------------------------------------
    def set(self, key: str, value: dict[str, Any]) -> None:
        self.set_many([(key, value)])

    def set_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        texts = {key: self.seal.sealed_text(key, value) for key, value in items}
        self.local.set_texts(texts)  # first: an answer is never only in a store that may be gone
        if self.store is not None:
            with self._lock:
                replace = self.refused & texts.keys()
            self._remote(lambda store: store.set_many(texts, replace))

    def _remote(self, call: Callable[[RedisStore], Any]) -> Any:
        store = self.store
        if store is None:
            return None
        try:
            return call(store)
        except store.errors as e:
            if not self._fallback:
                raise store.lost(e) from None
            self.store = None
            self._say(f"the shared cache at {self.shown} stopped answering ({store._cause(e)}); going on with the "
                      "local cache only (--cache-fallback local)")
            return None

    # -- claims: one request in flight per key across every process sharing the store --------------
    def claims(self, ttl_s: float) -> SharedClaims:
        return SharedClaims(self, ttl_s)

    # -- rate limits shared by every process that asks one provider with one key (ask.shared_limits) ----
    def limits(self, scope: str, concurrency: int | None, lease_s: float, owner: str) -> Any:
        store = self.store
        if store is None:
            return None
        import redis.asyncio

        from evalkit.ask.shared.limits import SharedLimits

        client = redis.asyncio.Redis.from_url(store.url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                              socket_timeout=SOCKET_TIMEOUT_S)
        return SharedLimits(client, scope, concurrency, owner, lease_s, lost=store.lost, errors=store.errors,
                            fallback=self._fallback)

    # -- the rest of CacheLike ---------------------------------------------------------------------
    def stats(self) -> CacheStats:
        entries = len(self.store.keys()) if self.store is not None else len(self.local)
        return CacheStats(entries=entries, size_bytes=0, directory=self.shown)

    def clear(self) -> int:
        return self.store.clear() if self.store is not None else 0

    @property
    def executor(self) -> Any:
        return self.local.executor

    def close(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
        finally:
            self.local.close()


class SharedClaims:
    """RedisClaims (evalkit.ask.claims) through the cache's guard: a lost Redis stops the run, or, with
    --cache-fallback local, claims nothing from then on (the run goes on alone)."""

    def __init__(self, shared: SharedCache, ttl_s: float) -> None:
        from evalkit.ask.claims import RedisClaims

        self.ttl_s = ttl_s
        self._shared = shared
        self._claims = RedisClaims(shared.store.client) if shared.store is not None else None

    def claim(self, key: str) -> bool:
        claims = self._claims
        if claims is None or self._shared.store is None:
            return True
        if key in self._shared.refused or key in self._shared.local.rejected_keys:
            return True  # asked at once, unclaimed (see evalkit.ask.store.cache.RefusedUnclaimed)
        claimed = self._shared._remote(lambda _: claims.claim(key))
        return True if claimed is None else bool(claimed)

    def release(self, key: str) -> None:
        claims = self._claims
        if claims is not None and self._shared.store is not None:
            self._shared._remote(lambda _: claims.release(key))

    def done(self, key: str) -> None:
        if self._claims is not None:
            self._claims.done(key)

    def close(self) -> None:
        if self._claims is not None:
            self._claims.close()


def _parsed(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def open_shared(url: str, local_dir: Path, *, fallback: bool = False, seal: CacheSeal | None = None,
                say: Callable[[str], None] = lambda line: None) -> SharedCache:
    """The shared cache for a run: Redis reached (or one line, exit 2), the local cache in front."""
    store = RedisStore(url)
    try:
        return SharedCache(ResponseCache(local_dir, seal), store, fallback=fallback, say=say)
    except BaseException:
        store.close()
        raise



def shared_cache_command(action: str, url: str, *, repair: bool, yes: bool, say: Callable[[str], None],
                         seal: CacheSeal | None = None) -> int:
    """`evalkit cache stats|clear|verify --cache-url URL`: the shared cache's entries. Clearing a team's cache
    needs --yes; verify reads every entry, says which would not be served and why (ask/store/seal.py) and,
    with --repair, removes those that do not parse or do not match their key."""
    store = RedisStore(url)
    try:
        if action == "clear":
            if not yes:
                raise EvalkitError(f"cache clear --cache-url removes every answer in {store.shown}, which a team may "
                                   "share: add --yes to clear it")
            say(f"removed {store.clear()} cached responses from {store.shown}")
            return 0
        keys = store.keys()
        if action == "stats":
            say(f"{store.shown}: {len(keys)} responses")
            return 0
        return _verify(store, keys, seal or CacheSeal(), repair, say)
    except store.errors as e:
        raise EvalkitError(f"cache {action}: Redis at {store.shown} stopped answering ({store._cause(e)})") from None
    finally:
        store.close()


def _verify(store: RedisStore, keys: list[bytes], seal: CacheSeal, repair: bool, say: Callable[[str], None]) -> int:
    """Every entry read: unreadable ones, and those not sealed to their key, counted apart and (repair) removed."""
    unreadable: list[bytes] = []
    readable: dict[str, dict[str, Any]] = {}
    for i in range(0, len(keys), _SCAN_COUNT):
        part = keys[i:i + _SCAN_COUNT]
        for k, v in zip(part, store.client.mget(part), strict=True):
            value = None if v is None else _parsed(v.decode("utf-8", "replace"))
            if value is None:
                unreadable.append(k)
            else:
                readable[k.decode("utf-8", "replace").removeprefix(PREFIX)] = value
    verdicts = audit(readable.items(), seal)
    counts = {why: sum(1 for v in verdicts.values() if v == why) for why in (SWAPPED, ALTERED, UNSIGNED, BADLY_SIGNED)}
    removable = [*unreadable, *(PREFIX.encode() + k.encode() for k, v in verdicts.items() if v in (SWAPPED, ALTERED))]
    if removable and repair:
        store.client.unlink(*removable)
    say(f"{store.shown}: {len(keys)} responses checked, {len(unreadable)} unreadable, {seal_counts(counts, seal)}"
        + (f" ({len(removable)} unreadable, swapped or altered removed)" if removable and repair else ""))
    failing = removable or counts[BADLY_SIGNED] or (seal.signed_only and counts[UNSIGNED])
    return 0 if not failing or repair else 1
