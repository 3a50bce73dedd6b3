"""Virtual time for limiter tests: sleep() parks a task until run() advances the clock."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Coroutine, Sequence
from typing import Any


class FakeClock:
    """Virtual time: sleep() parks the task until run() advances time to its wake-up.

    run() lets every runnable task settle (a few loop turns), then jumps to the earliest
    pending wake-up, so concurrent sleeps overlap as they would in real time.
    """

    SETTLE_TURNS = 25

    def __init__(self, start: float = 0.0):
        self.t = start
        self.sleeps = 0
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (self.t + seconds, next(self._seq), fut))
        await fut

    async def run(self, coros: Sequence[Coroutine[Any, Any, Any]]) -> list[Any]:
        tasks = [asyncio.ensure_future(c) for c in coros]
        idle = 0
        while not all(t.done() for t in tasks):
            for _ in range(self.SETTLE_TURNS):
                await asyncio.sleep(0)
            while self._heap and self._heap[0][2].done():
                heapq.heappop(self._heap)
            if not self._heap:
                idle += 1
                if idle > 100 and not all(t.done() for t in tasks):
                    raise RuntimeError("deadlock: tasks pending but nobody sleeping")
                continue
            idle = 0
            self.t = max(self.t, self._heap[0][0])
            while self._heap and self._heap[0][0] <= self.t:
                _, _, fut = heapq.heappop(self._heap)
                if not fut.done():
                    fut.set_result(None)
        return [t.result() for t in tasks]
