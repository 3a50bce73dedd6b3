"""Limits found, not guessed: the request and token rates a provider allows, learned as a run goes.

Where the provider announces its limits (OpenAI `x-ratelimit-limit-requests/-tokens`, Anthropic
`anthropic-ratelimit-requests-limit/-tokens-limit`, per minute), the rate is set just under them
(MARGIN), and a window announced as used up (remaining 0) pauses the client until it resets. Where
nothing is announced (vLLM behind a proxy, Gemini), the rate is found by AIMD: once refusals are a
sustained share of the replies (at least MIN_REFUSED of them and REFUSED_SHARE of the last WINDOW_S),
the rate is cut to CUT × the rate of successful answers just measured, then raised every STEP_S
seconds while refusals stay rare — quickly back to the rate measured (5, 10, 20, then 40 % per
step), then by 5 % per step, probing — and cut again when refusals come back (above the rate
found, a smaller share suffices; at most one cut per COOL_S).
A lone 429 from an overloaded replica does not slow the whole run; a rate limit refuses a growing
share as the client pushes past it, so the share is what tells them apart. User-given
`--rpm` / `--tpm` stay hard ceilings, with adaptation below them; `--no-adaptive` turns this off.

`AdaptiveRate.observe` is the whole policy: a pure function of what it was told and the time it was
told it (tests drive it on a fake clock); the limiter applies the rates it returns.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from evalkit.core.types import RateInfo

MARGIN = 0.97  # of an announced limit: room for the client's and the server's clocks to disagree
CUT = 0.8  # after a refusal without headers: this share of the measured success rate
RAISE = 1.05  # then this factor every STEP_S seconds without a refusal (below the rate found at
MAX_DOUBLINGS = 3  # the last cut its increase doubles with every step: 5, 10, 20, then 40 %)
STEP_S = 0.5
COOL_S = 0.5  # refusals within this long of a cut were caused by the old rate: no second cut
WINDOW_S = 1.0  # rates and shares are measured over this long
MEASURE_S = 0.1  # no cut before answers have come back for this long: refusals come back first
REFUSED_SHARE = 0.25  # random faults refuse a steady few per cent; a limit pushed past refuses more
PROBE_SHARE = 0.1  # above the rate found at the last cut, a smaller share is the limit again
MIN_REFUSED = 5
MIN_RPM = 6.0  # never below one request every 10 s


@dataclass(frozen=True)
class Rates:
    """What the limiter should enforce now (per minute; None: no limit) and whether to pause."""

    rpm: float | None
    tpm: float | None
    pause_s: float = 0.0
    source: str = "none"  # "headers", "aimd" or "none"


@dataclass
class AdaptiveRate:
    ceiling_rpm: float | None = None  # --rpm: never above
    ceiling_tpm: float | None = None  # --tpm
    start: float | None = None  # the first success: success rates are measured from then on
    rpm: float | None = None
    tpm: float | None = None
    source: str = "none"
    _last_cut: float = -math.inf
    _last_raise: float = -math.inf
    _last_hold: float = -math.inf
    _streak: int = 0  # raises in a row without a refusal: each one larger (a cut can undershoot far)
    _found: float | None = None  # the success rate measured at the last cut (per minute)
    _replies: deque[tuple[float, bool]] = field(default_factory=deque)  # (time, refused) in the window

    def rates(self, pause_s: float = 0.0) -> Rates:
        return Rates(_cap(self.rpm, self.ceiling_rpm), _cap(self.tpm, self.ceiling_tpm), pause_s, self.source)

    def observe(self, now: float, *, refused: bool, info: RateInfo | None = None) -> Rates:
        """One reply (a success or a 429), with the limits it announced, at time `now`."""
        pause = 0.0
        if self.start is None and not refused:
            self.start = now
        if info is not None:  # nothing left until a reset it names: everyone waits for it
            for left, reset in ((info.requests_left, info.requests_reset_s), (info.tokens_left, info.tokens_reset_s)):
                if left is not None and left <= 0 and reset:
                    pause = max(pause, reset)
        if info is not None and (info.requests_per_min or info.tokens_per_min):
            self.source = "headers"
            if info.requests_per_min:
                self.rpm = max(MIN_RPM, info.requests_per_min * MARGIN)
            if info.tokens_per_min:
                self.tpm = info.tokens_per_min * MARGIN
            return self.rates(pause)
        if self.source == "headers":
            return self.rates(pause)
        self._replies.append((now, refused))
        while self._replies and self._replies[0][0] < now - WINDOW_S:
            self._replies.popleft()
        if refused:
            self._streak = 0
            if self._storm_unmeasured(now):  # every slot would refill with a new request refused at once
                self._hold(now)
                return self.rates(pause_s=MEASURE_S)
            if self._should_cut(now):
                self._cut(now)
        elif self.rpm is not None and now - self._last_cut >= STEP_S and now - self._last_raise >= STEP_S:
            self._raise(now)
        return self.rates(pause)

    def _refused_share(self) -> tuple[int, bool]:
        refusals = sum(1 for _, r in self._replies if r)
        return refusals, refusals >= MIN_REFUSED and refusals >= REFUSED_SHARE * len(self._replies)

    def _storm_unmeasured(self, now: float) -> bool:
        """Refusals are most of the replies before any rate could be measured (at the start, when a
        limit is far below what the concurrency offers): hold everyone briefly instead of cutting."""
        if self._last_cut > -math.inf or now - self._last_hold < MEASURE_S:
            return False
        if self.start is not None and now - self.start >= MEASURE_S:
            return False
        return self._refused_share()[1]

    def _hold(self, now: float) -> None:
        """Pause everyone for MEASURE_S: answers come back meanwhile, and the next refusals can be
        weighed against a measured rate."""
        self._last_hold = now

    def _should_cut(self, now: float) -> bool:
        """Refusals are a sustained share of the window (a smaller one while probing above the rate
        last found), a cut made with this window's evidence is over, and there is a rate to measure."""
        if self.start is None or now - self.start < MEASURE_S or now - self._last_cut < COOL_S:
            return False
        refusals, sustained = self._refused_share()
        if self._found is not None and self.rpm is not None and self.rpm >= self._found:  # probing above it
            return refusals >= MIN_REFUSED and refusals >= PROBE_SHARE * len(self._replies)
        return sustained

    def _cut(self, now: float) -> None:
        window = min(WINDOW_S, now - self.start) if self.start is not None else WINDOW_S
        measured = sum(1 for t, r in self._replies if not r and t >= now - window) / window * 60.0
        if measured <= 0:  # nothing answered lately: no rate to cut from (the refused requests wait anyway)
            return
        self._found = measured
        self.rpm = max(MIN_RPM, measured * CUT)
        self.source = "aimd"
        self._last_cut = self._last_raise = now

    def _raise(self, now: float) -> None:
        """Up to the rate last found (or while none is), each step larger than the one before; beyond
        it, RAISE."""
        assert self.rpm is not None
        if self._found is None or self.rpm < self._found:
            raised = self.rpm * (1 + (RAISE - 1) * 2 ** min(self._streak, MAX_DOUBLINGS))
            self.rpm = raised if self._found is None else min(self._found, raised)
            self._streak += 1
        else:
            self.rpm *= RAISE
        self._last_raise = now


def _cap(value: float | None, ceiling: float | None) -> float | None:
    if value is None:
        return ceiling
    return value if ceiling is None else min(value, ceiling)
