"""A hidden rate limit, and the headers that announce it (or do not), as providers send them.

Requests per second (`SimFaults.rps`) and tokens per minute (`SimFaults.tpm`) are token buckets with
a burst of a tenth of a second's allowance. A request is admitted when its prompt tokens are there
and charged its output tokens as they are generated (the bucket may go into debt, which later
requests wait out), as providers that count input and output tokens per minute do. Beyond
the limit: 429, with Retry-After unless `rate_headers == "none"`. With `rate_headers` "openai" or
"anthropic", every reply also announces the limits per minute, what is left and when it resets, in
that provider's header names (see evalkit.providers.wire.rate_headers).
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone

from evalkit.sim.machinery.faults import ServerTokenBucket, SimFaults

HEADER_DIALECTS = ("openai", "anthropic", "none")


def _duration(seconds: float) -> str:
    """OpenAI's reset format: "20ms" under a second, else "1.5s"."""
    return f"{max(1, math.ceil(seconds * 1000))}ms" if seconds < 1 else f"{seconds:.3g}s"


class HiddenLimits:
    def __init__(self, faults: SimFaults, clock=time.monotonic) -> None:
        self.dialect = faults.rate_headers
        self.requests = ServerTokenBucket(faults.rps, clock=clock) if faults.rps else None
        per_s = faults.tpm / 60.0 if faults.tpm else None
        self.tokens = ServerTokenBucket(per_s, burst=max(1.0, per_s / 10.0), clock=clock) if per_s else None

    def admit_request(self) -> float:
        """0.0, the request counted; else the seconds until it would be allowed."""
        return self.requests.take() if self.requests is not None else 0.0

    def admit_tokens(self, cost: float) -> float:
        return self.tokens.take(cost) if self.tokens is not None else 0.0

    def charge(self, tokens: float) -> None:
        if self.tokens is not None and tokens > 0:
            self.tokens.take_debt(tokens)

    def retry_after(self, wait: float) -> dict[str, str]:
        if self.dialect == "none":
            return {}
        from evalkit.sim.machinery.faults import retry_headers

        return retry_headers(wait)

    def headers(self) -> dict[str, str]:
        """The limits as this dialect announces them (nothing for "none" or no dialect)."""
        if self.dialect not in ("openai", "anthropic"):
            return {}
        out: dict[str, str] = {}
        for name, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is None:
                continue
            level = bucket.level()
            limit, left = bucket.rps * 60, max(0, int(level))
            reset_s = max(0.0, (1.0 - level) / bucket.rps)  # until one more is allowed
            if self.dialect == "openai":
                out[f"x-ratelimit-limit-{name}"] = str(int(limit))
                out[f"x-ratelimit-remaining-{name}"] = str(left)
                out[f"x-ratelimit-reset-{name}"] = _duration(reset_s)
            else:
                at = datetime.fromtimestamp(time.time() + reset_s, timezone.utc).isoformat().replace("+00:00", "Z")
                out[f"anthropic-ratelimit-{name}-limit"] = str(int(limit))
                out[f"anthropic-ratelimit-{name}-remaining"] = str(left)
                out[f"anthropic-ratelimit-{name}-reset"] = at
        return out
