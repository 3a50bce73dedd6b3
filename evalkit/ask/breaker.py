"""The circuit breaker: stop a run that can only fail, and say why.

A server that dies mid-run refuses every connection; retries with backoff would spend minutes
on it and the run would end as a table of errors. The breaker watches every attempt: it trips
when the same failure has come back `burst` times in a row and nothing has succeeded for
`quiet_s` seconds. Then the runner sends nothing new, gives up retrying, and the run ends
(exit 1, resumable) naming the cause.

Rate limits, refusals and empty replies count as a server alive and answering, as a success does
(a 429 burst is the limiter's business, a refusal or an empty answer is the model's). Any other
class does: connection refused, 5xx, timeouts, and permanent errors such as a revoked key. An account
out of credits or quota ("exhausted": OpenRouter's 402, OpenAI's insufficient_quota) trips it at once.
Intermittent faults never trip it — one success resets it — so a run through 30% transient
faults completes. Pure state over an injected clock, so tests need no waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from evalkit.core.errors import ProviderError, cause_of

ALIVE_KINDS = frozenset({"rate_limit", "refused", "empty", "capacity"})  # the server answers: no streak
QUIET_S = 8.0  # a dead server ends the run within ~QUIET_S + the runner's halt drain of the last success
BURST = 8

def signature(error: ProviderError) -> str:
    """What makes two failures "the same" (core.errors.cause_of)."""
    return cause_of(error.kind, error.message)


@dataclass
class Breaker:
    quiet_s: float = QUIET_S
    burst: int = BURST
    clock: Callable[[], float] = time.monotonic
    tripped: str | None = None  # why it tripped: one line for the user
    exit_code: int = 1  # 1: resumable as it is; 2: the user must change something first (out of credits)
    _last_ok: float = field(init=False)
    _streak: str | None = field(default=None, init=False)
    _count: int = field(default=0, init=False)
    _example: str = field(default="", init=False)  # the streak's first message, as the user reads it

    def __post_init__(self) -> None:
        self._last_ok = self.clock()

    def success(self) -> None:
        self._last_ok = self.clock()
        self._streak, self._count = None, 0

    def check(self) -> None:
        """Trip on time alone: a streak long enough whose quiet time has since passed (retries back
        off, so the next failure may come seconds late; the runner calls this as it waits)."""
        if not self.tripped and self._streak is not None and self._count >= self.burst:
            quiet = self.clock() - self._last_ok
            if quiet >= self.quiet_s:
                self.tripped = self._reason(quiet)

    def _reason(self, quiet: float) -> str:
        return (f"{self._count} attempts in a row failed with the same error and nothing succeeded "
                f"for {quiet:.0f} s: {self._example}")

    def stop(self, reason: str) -> None:
        """Trip at once: the account cannot pay for more (exit 2 once what is in flight has come back)."""
        if not self.tripped:
            self.tripped, self.exit_code = reason, 2

    def failure(self, error: ProviderError) -> None:
        if self.tripped:
            return
        if error.kind == "exhausted":
            self.stop(f"{error.message}; every answer is kept: add credits, then re-run the same command")
            return
        if error.kind in ALIVE_KINDS:
            self.success()
            return
        sig = signature(error)
        if sig != self._streak:
            self._streak, self._count, self._example = sig, 0, error.message
        self._count += 1
        self.check()
