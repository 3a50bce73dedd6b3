"""No query paid twice in flight: processes sharing a cache claim a request key before sending it.

Two runs started together over one cache (two shards of a matrix, a teammate's run beside yours, a job
array) would otherwise both miss the cache and both pay for every query they share. Before sending, a
runner claims the request key: in Redis with `SET NX` and an expiry (RedisClaims), in a local cache folder
with diskcache's atomic `add` and an expiry (LocalClaims, its own small database beside cache.db). A
runner that finds the key claimed waits for the answer to appear in the cache, looking every POLL_S; once
the claim is gone without an answer (the other run failed, gave up, or was killed and its claim expired)
it claims the key and asks itself.

A claim is released when its answer will not reach the cache (an error, an empty answer); an answer that
is stored needs no release (whoever waits finds it in the cache), and the claim simply lapses. A claim of a
process that died is void: on the same machine it is taken over at once (its pid is gone), from another
machine it lapses (Redis claims are short and renewed while their requests are in flight). Claims hold
only an owner token (host, pid and a random part), never anything from the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

POLL_S = 0.25  # how often a waiting runner looks for the other run's answer
PREFIX = "evalkit:v1:claim:"


def owner_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _dead(owner: str) -> bool:
    """The owner is a process of this machine that no longer runs (killed: its claims are void at once)."""
    host, _, rest = owner.partition(":")
    if host != socket.gethostname():
        return False  # another machine's: its claim stands until it expires
    try:
        os.kill(int(rest.partition(":")[0]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError, OverflowError):
        return False
    return False


class Claims(Protocol):
    ttl_s: float

    def claim(self, key: str) -> bool:
        """True: the key is this runner's to send (it was free, already ours, or its owner died)."""
        ...

    def release(self, key: str) -> None:
        """Give the key up (only if this runner holds it)."""
        ...

    def done(self, key: str) -> None:
        """Its answer is stored: the claim may lapse (whoever waits finds the answer)."""
        ...

    def close(self) -> None: ...


class LocalClaims:
    """Claims in a cache folder, for processes on one machine (diskcache's add: an atomic insert). A claim
    whose process is gone is taken over at once; one whose process hangs lapses after ttl_s. Closing
    releases the claims still held (a run stopped mid-request in a process that lives on, a notebook's
    kernel: the same call again must not wait for them to lapse)."""

    def __init__(self, folder: Path, ttl_s: float, executor: Any = None) -> None:
        """`executor`: the cache's own thread, where claims are made (its sqlite connection is closed there)."""
        import threading

        self.ttl_s = ttl_s
        self.owner = owner_token()
        self._folder = folder / "claims"
        self._opened: Any = None  # made at the first claim: a run answered from the cache never needs it
        self._executor = executor
        self._held: set[str] = set()  # claimed, neither released nor answered
        self._lock = threading.Lock()

    @property
    def _db(self) -> Any:
        if self._opened is None:
            import diskcache

            self._opened = diskcache.Cache(str(self._folder))
        return self._opened

    def claim(self, key: str) -> bool:
        ours = self._claim(key)
        if ours:
            with self._lock:
                self._held.add(key)
        return ours

    def _claim(self, key: str) -> bool:
        if self._db.add(key, self.owner, expire=self.ttl_s, retry=True):
            return True
        held = self._db.get(key, retry=True)
        if held == self.owner:
            return True
        if isinstance(held, str) and _dead(held):
            with self._db.transact(retry=True):
                if self._db.get(key) == held:
                    self._db.set(key, self.owner, expire=self.ttl_s)
                    return True
        return False

    def release(self, key: str) -> None:
        self.done(key)
        with self._db.transact(retry=True):
            if self._db.get(key) == self.owner:
                self._db.delete(key)

    def done(self, key: str) -> None:
        with self._lock:  # its answer is stored: the claim may lapse
            self._held.discard(key)

    def _release_held(self) -> None:
        with self._lock:
            keys = sorted(self._held)
        for key in keys:
            with contextlib.suppress(Exception):  # best effort: a claim left lapses after ttl_s
                self.release(key)

    def close(self) -> None:
        db = self._opened
        if db is None:
            return
        released = False
        if self._executor is not None:  # after any claim still being made there
            with contextlib.suppress(Exception):
                self._executor.submit(self._release_held).result()
                released = True
        if not released:
            self._release_held()
        if self._executor is not None:  # sqlite connections are per thread: the cache thread's first
            with contextlib.suppress(Exception):
                self._executor.submit(db.close).result()
        db.close()


# Scripts that act on a claim only while it is still the one expected (a claim that lapsed may have passed on).
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
_TAKE_OVER = ("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('SET', KEYS[1], ARGV[2], 'PX', "
              "ARGV[3]) else return false end")
_EXTEND = ("local n = 0 for i, k in ipairs(KEYS) do if redis.call('GET', k) == ARGV[1] then "
           "redis.call('PEXPIRE', k, ARGV[2]) n = n + 1 end end return n")
REDIS_TTL_S = 30.0  # a claim of a machine that died lapses this soon; the living renew theirs every third of it


class RedisClaims:
    """Claims in Redis, for processes on any machine that share its cache. Claims are short and renewed by a
    background thread while their requests are in flight, so a machine that dies frees its keys within
    REDIS_TTL_S; a process of this machine that died frees them at once."""

    def __init__(self, client: Any, ttl_s: float = REDIS_TTL_S) -> None:
        import threading

        self.ttl_s = ttl_s
        self.owner = owner_token()
        self._client = client
        self._release = client.register_script(_RELEASE)
        self._take_over = client.register_script(_TAKE_OVER)
        self._extend = client.register_script(_EXTEND)
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def claim(self, key: str) -> bool:
        ms = int(self.ttl_s * 1000)
        ours = bool(self._client.set(PREFIX + key, self.owner, nx=True, px=ms))
        if not ours:
            raw = self._client.get(PREFIX + key)
            held = raw.decode("utf-8", "replace") if raw is not None else None
            ours = held == self.owner or (held is not None and _dead(held)
                                          and bool(self._take_over(keys=[PREFIX + key], args=[held, self.owner, ms])))
        if ours:
            with self._lock:
                self._held.add(key)
            self._start_renewing()
        return ours

    def release(self, key: str) -> None:
        self.done(key)
        self._release(keys=[PREFIX + key], args=[self.owner])

    def done(self, key: str) -> None:
        with self._lock:
            self._held.discard(key)

    def _start_renewing(self) -> None:
        import threading

        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="evalkit-claims", daemon=True)
            self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            with self._lock:
                keys = [PREFIX + k for k in self._held]
            if keys:
                try:
                    self._extend(keys=keys, args=[self.owner, int(self.ttl_s * 1000)])
                except Exception:  # noqa: BLE001 - a lost Redis is the cache's to report; the claims lapse
                    return

    def close(self) -> None:
        """Stop renewing, and release the claims still held (a run stopped mid-request in a process that
        lives on: the same call again must not wait for them to lapse)."""
        self._stop.set()
        with self._lock:
            keys = sorted(self._held)
        for key in keys:
            with contextlib.suppress(Exception):  # a lost Redis: they lapse
                self.release(key)


async def claim_or_wait(claims: Claims, key: str, *, look: Callable[[str], Awaitable[dict | None]],
                        in_thread: Callable[..., Awaitable[Any]]) -> dict | None:
    """None once the key is this runner's to send; the other run's answer if it arrives first."""
    while True:
        if await in_thread(claims.claim, key):
            return None
        found = await look(key)
        if found is not None:
            return found
        await asyncio.sleep(POLL_S)
