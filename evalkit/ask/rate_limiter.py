"""Client-side rate limiting: one Limiter per (provider, endpoint, model).

Providers enforce requests-per-minute and tokens-per-minute over short windows, so a
minute's worth of burst gets 429s. The buckets here therefore hold only a small burst
(rate * burst_s) and refill smoothly. Waiters queue on one asyncio.Lock, which keeps them
roughly FIFO and means only the head of the queue sleeps (for exactly the computed wait,
never a busy loop). pause() stops everyone, queued requests included, until a given time; the
retry policy no longer calls it (a 429 delays only the refused request), it is kept for adaptive
limits that slow the whole client down on purpose.

Time comes from a Clock so tests can drive thousands of requests on virtual time.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Protocol

from evalkit.ask.adaptive import AdaptiveRate
from evalkit.ask.shared.limits import SharedLimits
from evalkit.core.types import Query, RateInfo

# Float slack when comparing a refilled level with what is needed: sleeping exactly the
# computed wait must be enough, or the head of the queue would spin on rounding errors.
_EPS = 1e-9


def estimate_tokens(query: Query) -> int:
    """Rough input+output tokens for the TPM bucket before the request (corrected afterwards)."""
    text = sum(len(m.text()) for m in query.messages)
    return text // 4 + 800 * len(query.image_parts()) + query.params.max_tokens


class Clock(Protocol):
    """Monotonic time and sleeping, injectable so tests can use virtual time."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The event loop's wall clock: time.monotonic and asyncio.sleep."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class TokenBucket:
    """Smooth rate: capacity is a small burst (rate * burst_s), not a minute's worth.

    The level starts full, refills at rate_per_s up to capacity, and may go negative (debt)
    when a request is charged more than was available; debt is paid back by waiting.
    """

    def __init__(self, rate_per_s: float, capacity: float, clock: Clock):
        if rate_per_s <= 0:
            raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.rate = float(rate_per_s)
        self.capacity = float(capacity)
        self._clock = clock
        self._level = self.capacity
        self._last = clock.now()

    def _refill(self) -> None:
        now = self._clock.now()
        elapsed = now - self._last
        if elapsed > 0:
            self._level = min(self.capacity, self._level + elapsed * self.rate)
            self._last = now

    @property
    def level(self) -> float:
        """Tokens available now (negative while in debt)."""
        self._refill()
        return self._level

    def wait_s(self, n: float) -> float:
        """Seconds until n tokens could be taken (0.0 if now); takes nothing.

        A request bigger than the capacity can never fit, so it only waits for a full bucket
        and then goes into debt; otherwise it could never be served.
        """
        self._refill()
        need = min(float(n), self.capacity)
        if self._level + _EPS >= need:
            return 0.0
        return (need - self._level) / self.rate

    def try_take(self, n: float) -> float:
        """Take n tokens and return 0.0, or return the seconds to wait before retrying (takes nothing)."""
        wait = self.wait_s(n)
        if wait == 0.0:
            self._level -= n
        return wait

    def retune(self, rate_per_s: float, capacity: float) -> None:
        """A new rate and burst, keeping what has accrued (adaptive limits change them as they learn)."""
        self._refill()
        self.rate, self.capacity = float(rate_per_s), float(capacity)
        self._level = min(self._level, self.capacity)

    def adjust(self, delta: float) -> None:
        """Charge (+) or refund (-) after the fact, e.g. actual vs estimated tokens; may go into debt."""
        self._refill()
        self._level = min(self.capacity, self._level - delta)


@dataclass
class LimiterStats:
    """What the limiter cost the run, for the summary and for tuning --rpm/--concurrency."""

    requests: int = 0  # slots granted
    waited_s: float = 0.0  # total time requests spent waiting for a slot (pauses included)
    paused_s: float = 0.0  # total length of pause() windows (overlaps counted once)
    max_in_flight: int = 0  # most slots held at once

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class Slot:
    """A granted request slot; report_tokens corrects the TPM charge once usage is known."""

    def __init__(self, limiter: Limiter, est_tokens: int, waited_s: float, charged: int | None = None):
        self._limiter = limiter
        self.est_tokens = est_tokens
        self.charged_tokens = est_tokens if charged is None else charged
        self.waited_s = waited_s

    def report_tokens(self, actual: int) -> None:
        """Replace the estimate with the actual count (refund or extra charge); repeatable."""
        if actual > 0 and self.est_tokens > 0:
            self._limiter.learn_tokens(actual / self.est_tokens)
        delta = actual - self.charged_tokens
        self.charged_tokens = actual
        bucket = self._limiter.tpm_bucket
        if delta and bucket is not None:
            bucket.adjust(delta)


class Limiter:
    """Concurrency cap + RPM and TPM token buckets + whole-client pauses for one endpoint/model."""

    def __init__(
        self,
        *,
        concurrency: int = 32,
        rpm: float | None = None,
        tpm: float | None = None,
        burst_s: float = 0.1,
        clock: Clock | None = None,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if burst_s <= 0:
            raise ValueError(f"burst_s must be positive, got {burst_s}")
        self.concurrency = concurrency
        self.clock: Clock = clock or RealClock()
        self._sem = asyncio.Semaphore(concurrency)
        self._lock = asyncio.Lock()
        self._rpm = self._bucket(rpm, burst_s, "rpm")
        self._tpm = self._bucket(tpm, burst_s, "tpm")
        self._pause_until = float("-inf")
        self._in_flight = 0
        self.stats = LimiterStats()
        self._burst_s = burst_s
        self.adaptive: AdaptiveRate | None = None  # adapt_rates() turns it on
        self.shared: SharedLimits | None = None  # with a shared cache: rates and in-flight cap shared (ask.shared_limits)
        self._published: tuple[float | None, float | None] = (None, None)
        self._publishing: set[asyncio.Task[None]] = set()
        self._token_ratio: float | None = None  # actual / estimated tokens, a running mean (adaptive only)

    def adapt_rates(self) -> None:
        """Learn the rates from what the provider says (see ask.adaptive); --rpm/--tpm stay ceilings."""
        self.adaptive = AdaptiveRate(self._rpm.rate * 60 if self._rpm else None,
                                     self._tpm.rate * 60 if self._tpm else None)

    def observe(self, *, refused: bool, info: RateInfo | None = None) -> None:
        """A reply came back (a 429 when `refused`): adapt the rates to it, when adapting."""
        if self.adaptive is None:
            return
        rates = self.adaptive.observe(self.clock.now(), refused=refused, info=info)
        self._rpm = self._retuned(self._rpm, rates.rpm)
        self._tpm = self._retuned(self._tpm, rates.tpm)
        if rates.pause_s > 0:
            self.pause(min(rates.pause_s, 60.0))
        if self.shared is not None and ((rates.rpm, rates.tpm) != self._published or rates.pause_s > 0):
            self._published = (rates.rpm, rates.tpm)  # what others should enforce too: one write per change
            task = asyncio.ensure_future(self.shared.publish(rates.rpm, rates.tpm, min(rates.pause_s, 60.0),
                                                             rates.source))
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)

    def learn_tokens(self, ratio: float) -> None:
        """How far off the token estimate was. Estimates count max_tokens, which a short answer uses a
        sliver of; charged at face value they would keep a token limit's bucket several times emptier
        than it is. Adaptive limiters charge the estimate scaled by what replies actually used."""
        if self.adaptive is not None:
            r = self._token_ratio
            self._token_ratio = ratio if r is None else 0.9 * r + 0.1 * ratio

    def _charge(self, est_tokens: int) -> int:
        if self._token_ratio is None or est_tokens <= 0:
            return est_tokens
        return max(1, math.ceil(est_tokens * min(2.0, self._token_ratio * 1.1)))

    def _retuned(self, bucket: TokenBucket | None, per_minute: float | None) -> TokenBucket | None:
        if per_minute is None:
            return bucket
        rate = per_minute / 60.0
        if bucket is None:
            return TokenBucket(rate, max(1.0, rate * self._burst_s), self.clock)
        bucket.retune(rate, max(1.0, rate * self._burst_s))
        return bucket

    def learned(self) -> dict[str, float | str] | None:
        """The rates enforced at the end (summary "throughput"."limits"), when adaptation learned any."""
        if self.adaptive is None or self.adaptive.source == "none":
            return None
        out: dict[str, float | str] = {"source": self.adaptive.source}
        for name, bucket in (("rpm", self._rpm), ("tpm", self._tpm)):
            if bucket is not None:
                out[name] = round(bucket.rate * 60, 1)
        return out

    def learned_line(self) -> str | None:
        """For the live display: requests in flight, and the rate being enforced with where it came from."""
        if self.adaptive is None or self.adaptive.source == "none" or self._rpm is None:
            return None
        return f"in flight {self._in_flight} · limit {self._rpm.rate:.1f}/s ({self.adaptive.source})"

    def _bucket(self, per_minute: float | None, burst_s: float, name: str) -> TokenBucket | None:
        if per_minute is None:
            return None
        if per_minute <= 0:
            raise ValueError(f"{name} must be positive, got {per_minute}")
        rate = per_minute / 60.0
        return TokenBucket(rate, max(1.0, rate * burst_s), self.clock)

    @property
    def rpm_bucket(self) -> TokenBucket | None:
        return self._rpm

    @property
    def tpm_bucket(self) -> TokenBucket | None:
        return self._tpm

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def paused_until(self) -> float:
        """Clock time before which no request starts (-inf when never paused)."""
        return self._pause_until

    def pause(self, seconds: float) -> None:
        """Nobody starts before now+seconds; overlapping pauses take the max. A wait that is not a
        finite number (inf, nan) is refused: it would stop the client for good."""
        if not math.isfinite(seconds):
            raise ValueError(f"pause must be a finite number of seconds, got {seconds}")
        if seconds <= 0:
            return
        now = self.clock.now()
        until = now + seconds
        if until > self._pause_until:
            self.stats.paused_s += until - max(now, self._pause_until)
            self._pause_until = until

    def _wait_s(self, est_tokens: int) -> float:
        """Seconds until this request may start (pause, then both buckets); takes nothing."""
        wait = self._pause_until - self.clock.now()
        if wait > 0:
            return wait
        if self._rpm is not None:
            wait = max(wait, self._rpm.wait_s(1))
        if self._tpm is not None and est_tokens > 0:
            wait = max(wait, self._tpm.wait_s(est_tokens))
        return max(0.0, wait)

    async def _acquire_tokens(self, est_tokens: int) -> None:
        """Hold the queue lock until pause and buckets allow, then take both in one step.

        Checking and taking happen with no await between them, so a pause issued while we
        slept is seen, and the RPM token is never taken without the TPM tokens.
        """
        async with self._lock:
            if self.shared is not None:  # the shared bucket instead of this process's own
                while True:
                    wait = self._pause_until - self.clock.now()
                    if wait <= 0:
                        wait = await self.shared.wait_s(est_tokens)
                    if wait <= 0:
                        return
                    await self.clock.sleep(wait)
            while True:
                wait = self._wait_s(est_tokens)
                if wait <= 0:
                    break
                await self.clock.sleep(wait)
            if self._rpm is not None:
                self._rpm.try_take(1)
            if self._tpm is not None and est_tokens > 0:
                self._tpm.try_take(est_tokens)

    @asynccontextmanager
    async def slot(self, est_tokens: int = 0) -> AsyncIterator[Slot]:
        """Wait for a concurrency slot, then pause/RPM/TPM, and hold the slot for the request.

        The semaphore comes first so tokens are taken only when the request can start at once;
        taking tokens first and then queueing on the semaphore would release bursts.
        """
        est_tokens = max(0, int(est_tokens))
        charged = self._charge(est_tokens)
        start = self.clock.now()
        async with self._sem:
            lease = await self.shared.enter() if self.shared is not None else None
            try:
                await self._acquire_tokens(charged)
                waited = self.clock.now() - start
                self.stats.requests += 1
                self.stats.waited_s += waited
                self._in_flight += 1
                self.stats.max_in_flight = max(self.stats.max_in_flight, self._in_flight)
                try:
                    yield Slot(self, est_tokens, waited, charged)
                finally:
                    self._in_flight -= 1
            finally:
                if lease is not None:
                    await asyncio.shield(self.shared.leave(lease))  # type: ignore[union-attr]
