"""The rate-limit headers providers send, read into one RateInfo (pure; every value checked).

OpenAI (platform.openai.com/docs/guides/rate-limits, read 2026-11-25): `x-ratelimit-limit-requests`,
`-remaining-requests`, `-reset-requests` (a duration such as "1s", "6m0s", "20ms"), and the same for
`-tokens`. Anthropic (docs.anthropic.com/en/api/rate-limits, read 2026-11-25):
`anthropic-ratelimit-requests-limit`, `-requests-remaining`, `-requests-reset` (an RFC 3339 time), and
`-tokens-*` (or, on newer accounts, `-input-tokens-*`). Limits are per minute in both. OpenRouter
(openrouter.ai/docs/api-reference/limits, read 2026-11-26): `X-RateLimit-Limit`, `-Remaining` and `-Reset`
(epoch milliseconds), over a window it does not name: what is left and when it refills, no rate.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import datetime

from evalkit.core.types import RateInfo

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _number(value: str | None) -> float | None:
    try:
        x = float(value) if value is not None else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) and x >= 0 else None


def duration_s(text: str | None) -> float | None:
    """"6m0s" -> 360.0, "20ms" -> 0.02, "1.5s" -> 1.5; None when it is no such duration."""
    if not text:
        return None
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _until_s(text: str | None, now: float) -> float | None:
    """Seconds from `now` (epoch) until an RFC 3339 time; None when unreadable."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return max(0.0, at - now)


def rate_info(headers: Mapping[str, str], now: float | None = None) -> RateInfo | None:
    """The limits announced in `headers` (case-insensitive), or None when there are none."""
    h = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    if "x-ratelimit-limit-requests" in h or "x-ratelimit-limit-tokens" in h:
        return RateInfo(_number(h.get("x-ratelimit-limit-requests")),
                        _number(h.get("x-ratelimit-remaining-requests")),
                        duration_s(h.get("x-ratelimit-reset-requests")),
                        _number(h.get("x-ratelimit-limit-tokens")),
                        _number(h.get("x-ratelimit-remaining-tokens")),
                        duration_s(h.get("x-ratelimit-reset-tokens")))
    a = "anthropic-ratelimit-"
    if f"{a}requests-limit" in h or f"{a}tokens-limit" in h or f"{a}input-tokens-limit" in h:
        tokens = "tokens" if f"{a}tokens-limit" in h else "input-tokens"
        return RateInfo(_number(h.get(f"{a}requests-limit")), _number(h.get(f"{a}requests-remaining")),
                        _until_s(h.get(f"{a}requests-reset"), now), _number(h.get(f"{a}{tokens}-limit")),
                        _number(h.get(f"{a}{tokens}-remaining")), _until_s(h.get(f"{a}{tokens}-reset"), now))
    if "x-ratelimit-remaining" in h:
        reset_ms = _number(h.get("x-ratelimit-reset"))
        return RateInfo(None, _number(h.get("x-ratelimit-remaining")),
                        None if reset_ms is None else min(3600.0, max(0.0, reset_ms / 1000 - now)))
    return None
