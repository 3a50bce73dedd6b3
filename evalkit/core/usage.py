"""What a reply used and announced: its token counts (and the cost a provider reported with them), and the
rate limits its headers announced. Plain values, read and written by every provider and by the records."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class Usage:
    """Token counts, and `cost_usd` where the provider itself says what the answer cost (OpenRouter):
    then that is the cost, not an estimate from a price table."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.reasoning_tokens += other.reasoning_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd

    def to_dict(self) -> dict[str, Any]:  # asdict's deep copy cost more than the rest of a record
        d: dict[str, Any] = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                             "cached_input_tokens": self.cached_input_tokens, "reasoning_tokens": self.reasoning_tokens}
        if self.cost_usd is not None:  # only where reported: every other record and cache value as before
            d["cost_usd"] = self.cost_usd
        return d

    @staticmethod
    def from_dict(d: dict[str, Any] | None) -> Usage:
        d = d or {}
        cost = d.get("cost_usd")
        return Usage(*(int(d.get(k) or 0) for k in _TOKEN_FIELDS), cost_usd=reported_cost(cost))


_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")


def reported_cost(value: Any) -> float | None:
    """A cost a provider reported: a finite non-negative number, else None (never a guess)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


@dataclass(frozen=True)
class RateInfo:
    """The limits a reply announced (per minute), what is left of them and when they reset (seconds)."""

    requests_per_min: float | None = None
    requests_left: float | None = None
    requests_reset_s: float | None = None
    tokens_per_min: float | None = None
    tokens_left: float | None = None
    tokens_reset_s: float | None = None
