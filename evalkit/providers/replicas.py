"""Several base URLs serving one model: send each request to the least-busy healthy replica.

An endpoint that refuses connections is taken out at once (nothing was delivered, so the
request moves to another replica within the same attempt); one that keeps failing in other
ways is taken out after a few consecutive failures. Either comes back after a cool-down.
Which replica answered never enters the cache key (the endpoint identity is the whole set).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Replica:
    url: str
    outstanding: int = 0
    served: int = 0
    failures: int = 0  # consecutive
    errors: int = 0  # failed attempts in all (429s included)
    rate_limited: int = 0  # 429s
    down_until: float = 0.0


class ReplicaPool:
    def __init__(self, urls: Sequence[str], *, failures_to_eject: int = 3, cooldown_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        if not urls:
            raise ValueError("a replica pool needs at least one URL")
        self.replicas = [Replica(u) for u in urls]
        self.failures_to_eject = failures_to_eject
        self.cooldown_s = cooldown_s
        self._clock = clock

    def __len__(self) -> int:
        return len(self.replicas)

    def healthy(self) -> list[Replica]:
        now = self._clock()
        return [r for r in self.replicas if r.down_until <= now]

    def pick(self, exclude: Sequence[Replica] = ()) -> Replica:
        """Fewest outstanding requests among healthy replicas (ties: fewest served)."""
        candidates = [r for r in self.healthy() if r not in exclude] or \
            [r for r in self.replicas if r not in exclude] or self.replicas
        if not any(r.down_until <= self._clock() for r in candidates):  # all out: the one back soonest
            return min(candidates, key=lambda r: r.down_until)
        return min(candidates, key=lambda r: (r.down_until > self._clock(), r.outstanding, r.served))

    @contextmanager
    def lease(self, replica: Replica) -> Iterator[Replica]:
        replica.outstanding += 1
        try:
            yield replica
        finally:
            replica.outstanding -= 1

    def succeeded(self, replica: Replica) -> None:
        replica.served += 1
        replica.failures = 0
        replica.down_until = 0.0

    def failed(self, replica: Replica, *, unreachable: bool = False) -> None:
        """Count a failure; an unreachable replica, or one failing repeatedly, is taken out."""
        replica.failures += 1
        if unreachable or replica.failures >= self.failures_to_eject:
            replica.down_until = self._clock() + self.cooldown_s

    def stats(self) -> dict[str, dict[str, int]]:
        return {r.url: {"served": r.served, "errors": r.errors, "rate_limited": r.rate_limited,
                        "down": int(r.down_until > self._clock())} for r in self.replicas}
