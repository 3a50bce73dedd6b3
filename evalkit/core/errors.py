"""Two families of failure: the user's input (exit 2, one line, no traceback) and a provider's reply.

Provider errors are classified once, by the provider adapter, so the runner can decide
retry / wait / give up without knowing any SDK. The server's own retry time is read here, once for
every provider, because what servers put in Retry-After is not always a number a client can wait.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.core.types import RateInfo


class EvalkitError(Exception):
    """Bad input or usage. The CLI prints `evalkit: error: <message>` and exits 2."""

    exit_code = 2


class DataError(EvalkitError):
    """A fault of one item's data found while asking it (an image that cannot be read or is over the
    --max-image-mb cap): the item's, not the model's. The runner records it as that query's data error
    ("data"): never scored against the model, never a failed request a re-run could fix."""


class RunError(EvalkitError):
    """An error of the whole run, not of one query (the server does not serve the model, the shared cache is
    gone): the runner stops at it instead of recording it as that query's failure."""


class ProviderError(Exception):
    """A classified failure of one request.

    kind: "rate_limit" (only this request waits: `retry_after` seconds, capped by the retry policy,
    or its backoff when the server named no time),
    "transient" (retry with backoff), "timeout" (retry), "empty" (empty content, retry),
    "permanent" (never retried: bad request, auth), "refused" (never retried: the provider
    declined on content grounds — a safety block or content filter), "exhausted" (never retried, and
    nothing more is sent: the account is out of credits or quota until the user tops it up),
    "capacity" (a service tier had no room for the request, e.g. a flex 429 "Resource Unavailable": never a
    quota signal; its own back-off, and --tier-fallback; named by the runner, evalkit/ask/capacity.py).
    """

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None, status: int | None = None,
                 limits: RateInfo | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.status = status
        self.limits = limits  # what the refusal announced, if anything (adaptive limits read it)

    @property
    def retryable(self) -> bool:
        return self.kind not in ("permanent", "refused", "exhausted")


REASON_CHARS = 300  # how much of a server's own words a message keeps, after evalkit's short lead-in
MESSAGE_CHARS = 2 * REASON_CHARS  # a whole message at most (a lead-in, the server's reason, a hint)


def server_reason(text: object, limit: int = REASON_CHARS) -> str:
    """A server's own words as one line: whole up to `limit` characters, else cut at the end of a word with
    `…` (never mid-word). Callers put their lead-in before it, outside the limit, so it never crowds the
    reason out."""
    words = " ".join(str(text).split())
    if len(words) <= limit:
        return words
    cut = words[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 2 else cut).rstrip(" ,;:") + "…"


_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_NUMBER = re.compile(r"\d+")


def cause_of(kind: str | None, message: str | None) -> str:
    """What makes two failures "the same cause": their kind and message with addresses and numbers
    blanked (replicas, ports and request ids differ; the cause does not). The circuit breaker counts
    streaks by it, the error banner groups by it."""
    return f"{kind}|{_NUMBER.sub('#', _URL.sub('URL', message or ''))}"


def classify_status(status: int) -> str:
    """HTTP status -> error kind, shared by every HTTP-speaking provider."""
    if status == 429:
        return "rate_limit"
    if status in (408, 409, 425) or status >= 500:
        return "transient"
    return "permanent"


# A finite bound on any wait read from a header: a 400-digit number or a date in the year 9999 must
# never become a sleep that overflows a timer or never ends. The run's own, much lower cap
# (RetryPolicy.max_retry_after_s) is what applies in practice.
MAX_HEADER_WAIT_S = 24 * 3600.0

_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def _number_s(text: str, scale: float) -> float | None:
    """A plain non-negative decimal times scale, clamped; None for anything else (inf, nan, -1, 1e3, 0x10)."""
    if not _SECONDS.fullmatch(text):
        return None
    return min(MAX_HEADER_WAIT_S, float(text) * scale)  # float() of a huge digit string is inf: clamped


def _http_date_s(text: str, now: float | None) -> float | None:
    """Seconds from now until an HTTP-date (IMF-fixdate, RFC 850 or asctime form); 0 if it is past."""
    from email.utils import parsedate_tz  # lazy: only a date-valued header needs it

    parts = parsedate_tz(text)
    if parts is None:
        return None
    try:
        when = datetime(*parts[:6], tzinfo=timezone.utc).timestamp() - (parts[9] or 0)
    except (ValueError, OverflowError, TypeError):  # hour 25, year 99999, ...
        return None
    wait = when - (time.time() if now is None else now)
    return min(MAX_HEADER_WAIT_S, max(0.0, wait))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After (RFC 9110: delay-seconds or an HTTP-date) as seconds to wait, or None if unusable.

    Servers and proxies send odd things, and a bad value must not stall a run: inf, nan, negative,
    exponent or other non-numeric text is None (the caller backs off on its own); a huge number or a
    far date is clamped to MAX_HEADER_WAIT_S; a past date is 0. Fractions are accepted. `now` is the
    epoch time dates are measured from (default: the clock).
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    seconds = _number_s(text, 1.0)
    return seconds if seconds is not None else _http_date_s(text, now)


def _header(headers: Any, name: str) -> str | None:
    """headers[name] compared case-insensitively, from aiohttp/httpx headers or a plain dict."""
    value = headers.get(name)
    if value is None and isinstance(headers, Mapping):
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == name), None)
    return value if isinstance(value, str) else None


def retry_after_from_headers(headers: Any, *, now: float | None = None) -> float | None:
    """The server's wait from `retry-after-ms` (milliseconds, OpenAI and Anthropic send it), else
    `retry-after`; an unusable value in one falls through to the next, None when neither is usable."""
    if headers is None:
        return None
    ms = _header(headers, "retry-after-ms")
    seconds = _number_s(ms.strip(), 0.001) if ms is not None else None
    return seconds if seconds is not None else parse_retry_after(_header(headers, "retry-after"), now=now)
