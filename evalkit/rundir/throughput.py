"""Latency and throughput of one invocation: what vLLM users weigh against serving cost.

Over the answers this invocation received live (cache hits cost no time): latency p50, p95 and max
(nearest rank), then requests per second (attempts, retries included), answers and output tokens per
second over the ask phase, retries and 429s, and per replica what each served and refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evalkit.core.record import Record


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of sorted values (p in 0..100); the smallest value p% of them do not exceed."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def throughput(fresh: Sequence[Record], ask_s: float, *, attempts: int, retries: int, rate_limited: int,
               output_tokens: int, replicas: dict[str, dict[str, int]] | None = None,
               limits: dict[str, Any] | None = None, capacity_refused: int = 0,
               tier_fallbacks: int = 0) -> dict[str, Any] | None:
    """The summary's "throughput" block, or None when this invocation sent nothing. A service tier's capacity
    refusals and the queries sent at standard after them (--tier-fallback) are counted apart from the 429s of
    the account's limits, and only where there were any (summaries stay as they were)."""
    latencies = sorted(r.latency_s for r in fresh if not r.cached and r.error is None and r.latency_s > 0)
    if not attempts and not latencies:
        return None
    per_s = (lambda n: round(n / ask_s, 3)) if ask_s > 0 else (lambda n: None)
    out: dict[str, Any] = {
        "answered": len(latencies),
        "latency_s": {name: round(percentile(latencies, p), 4) for name, p in (("p50", 50), ("p95", 95), ("max", 100))}
        if latencies else None,
        "ask_s": round(ask_s, 3), "requests_per_s": per_s(attempts), "answers_per_s": per_s(len(latencies)),
        "output_tokens_per_s": per_s(output_tokens), "requests": attempts, "retries": retries,
        "rate_limited": rate_limited,
    }
    if capacity_refused or tier_fallbacks:
        out["capacity_refused"] = capacity_refused
        out["tier_fallbacks"] = tier_fallbacks
    if replicas and len(replicas) > 1:
        out["replicas"] = replicas
    if limits:
        out["limits"] = limits
    return out
