"""Two families of failure: the user's input (exit 2, one line, no traceback) and a provider's reply.

Provider errors are classified once, by the provider adapter, so the runner can decide
retry / pause / give up without knowing any SDK.
"""

from __future__ import annotations


class EvalkitError(Exception):
    """Bad input or usage. The CLI prints `evalkit: error: <message>` and exits 2."""

    exit_code = 2


class ProviderError(Exception):
    """A classified failure of one request.

    kind: "rate_limit" (retry after `retry_after` seconds, pausing the whole limiter),
    "transient" (retry with backoff), "timeout" (retry), "empty" (empty content, retry),
    "permanent" (never retried: bad request, auth), "refused" (never retried: the provider
    declined on content grounds — a safety block or content filter).
    """

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.status = status

    @property
    def retryable(self) -> bool:
        return self.kind not in ("permanent", "refused")


def classify_status(status: int) -> str:
    """HTTP status -> error kind, shared by every HTTP-speaking provider."""
    if status == 429:
        return "rate_limit"
    if status in (408, 409, 425) or status >= 500:
        return "transient"
    return "permanent"


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After header (seconds; HTTP dates are rare from APIs and treated as unknown)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
