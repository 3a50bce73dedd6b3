"""A thread-safe LRU memo bounded by total weight (bytes), where concurrent misses on one key
compute it once: the other callers wait for the first and count as hits.

Used by the image pipeline for source hashes, prepared images and fingerprints.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """LRU bounded by total weight; concurrent misses on one key compute it once."""

    def __init__(self, max_weight: int, weigh: Callable[[K, V], int], stats: Any = None):
        self._max = max_weight
        self._weigh = weigh
        self._stats = stats
        self._lock = threading.Lock()
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._inflight: dict[K, Future[V]] = {}
        self._total = 0

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self._count("memo_hits")
                return hit[0]
            fut = self._inflight.get(key)
            owner = fut is None
            if fut is None:
                fut = self._inflight[key] = Future()
                self._count("memo_misses")
            else:
                self._count("memo_hits")
        if not owner:
            return fut.result()
        try:
            value = compute()
        except BaseException as e:
            with self._lock:
                del self._inflight[key]
            fut.set_exception(e)
            raise
        with self._lock:
            del self._inflight[key]
            self._store(key, value)
        fut.set_result(value)
        return value

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def peek(self, key: K) -> V | None:
        """The memoised value or None, without computing or counting anything."""
        with self._lock:
            hit = self._items.get(key)
        return hit[0] if hit is not None else None

    def put(self, key: K, value: V) -> None:
        with self._lock:
            if key not in self._items:
                self._store(key, value)

    def _store(self, key: K, value: V) -> None:
        w = self._weigh(key, value)
        if w > self._max:
            return
        self._items[key] = (value, w)
        self._total += w
        while self._total > self._max:
            _, (_, ow) = self._items.popitem(last=False)
            self._total -= ow
            self._count("evictions")
        if self._stats is not None:
            self._stats.memo_bytes = self._total

    def _count(self, name: str) -> None:
        if self._stats is not None:
            setattr(self._stats, name, getattr(self._stats, name) + 1)
