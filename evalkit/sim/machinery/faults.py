"""Fault injection and rate limiting for the simulated server.

Faults are drawn from a seeded RNG stream owned by one server, not from the request's content:
a retried request must be able to succeed, which a content-keyed fault never would.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

FAULT_KINDS = ("429", "500", "503", "hang", "drop", "malformed", "empty", "400", "refusal")
# drawn when no kinds are named: the transient ones (400 and refusal are permanent: opt in)
DEFAULT_KINDS = FAULT_KINDS[:7]


@dataclass(frozen=True)
class SimFaults:
    """What goes wrong, and how often.

    rate: probability that a request gets a fault; kinds: which faults (chosen uniformly);
    retry_after: what a fault 429 advertises: seconds (Retry-After rounded up, and retry-after-ms),
    a string sent as is in Retry-After only (an HTTP-date, "999999", "soon"), or None for no header;
    retry_after_ms: if set, the retry-after-ms text sent as is instead ("inf", "nan", "-5"), so a
    client can be shown a value no server should send;
    hang_s: how long a hang lasts before a 504; latency_s: added to every answer;
    rps: token-bucket limit (None: unlimited), burst max(1, rps/10); tpm: the same for tokens per minute;
    rate_headers: how replies announce those limits: "openai", "anthropic", "none" (not even Retry-After
    on their 429s), or None (Retry-After only) — see evalkit.sim.machinery.limits.
    """

    rate: float = 0.0
    kinds: tuple[str, ...] = DEFAULT_KINDS
    retry_after: float | str | None = 1.0
    retry_after_ms: str | None = None
    hang_s: float = 30.0
    latency_s: float = 0.0
    rps: float | None = None
    tpm: float | None = None
    rate_headers: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kind(s) {', '.join(bad)}; expected some of {', '.join(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError("fault rate must be between 0 and 1")
        if self.rate > 0 and not self.kinds:
            raise ValueError("a fault rate needs at least one fault kind")
        ra = self.retry_after
        if isinstance(ra, int | float) and not (math.isfinite(ra) and ra >= 0):
            raise ValueError(f"retry_after must be finite seconds >= 0, got {ra} (pass a string to send it as is)")

    def headers_429(self) -> dict[str, str]:
        """The headers of an injected 429."""
        ra = self.retry_after
        headers = retry_headers(ra) if isinstance(ra, int | float) else {} if ra is None else {"Retry-After": ra}
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = self.retry_after_ms
        return headers


class FaultDice:
    """Draws the fault (or None) for each request from a seeded stream."""

    def __init__(self, faults: SimFaults) -> None:
        self.faults = faults
        self._rng = random.Random(faults.seed)

    def draw(self) -> str | None:
        if self.faults.rate <= 0 or not self.faults.kinds:
            return None
        if self._rng.random() >= self.faults.rate:
            return None
        return self._rng.choice(self.faults.kinds)


class ServerTokenBucket:
    """rps tokens per second, holding at most `burst`; take() returns 0 or the seconds to wait."""

    def __init__(self, rps: float, burst: float | None = None, clock=time.monotonic) -> None:
        if rps <= 0:
            raise ValueError("rps must be positive")
        self.rps = rps
        self.burst = burst if burst is not None else max(1.0, rps / 10.0)
        self._clock = clock
        self._tokens = self.burst
        self._last = clock()

    def level(self) -> float:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rps)
        self._last = now
        return self._tokens

    def take(self, n: float = 1.0) -> float:
        """Take n tokens and return 0.0, or the seconds until n would be there (a cost above the burst
        waits for a full bucket and then goes into debt, so it can be served at all)."""
        need = min(n, self.burst)
        if self.level() >= need:
            self._tokens -= n
            return 0.0
        return (need - self._tokens) / self.rps

    def take_debt(self, n: float) -> None:
        """Take n tokens now, into debt if need be (a charge made after the fact)."""
        self._tokens = self.level() - n


def retry_headers(seconds: float) -> dict[str, str]:
    """Both spellings clients read: Retry-After (whole seconds, rounded up) and retry-after-ms."""
    seconds = max(0.0, seconds)
    return {"Retry-After": str(max(1, math.ceil(seconds))), "retry-after-ms": str(max(1, math.ceil(seconds * 1000)))}
