"""A failed connection, said plainly: "connection refused", "host name not found (DNS)", a TLS failure.

The preflight and the chat-completions adapter name the same causes the same way, so the error
banner and the circuit breaker group them (and a user reads the cause, not an exception class).
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from typing import Any


def connect_cause(e: BaseException) -> str:
    """Why an aiohttp connection failed (ClientConnectorError and its subclasses)."""
    import aiohttp

    if isinstance(e, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return f"TLS failure ({type(e).__name__})"
    cause = getattr(e, "os_error", None)
    text = str(cause or e).lower()
    if getattr(cause, "errno", None) == errno.ECONNREFUSED or "refused" in text:
        return "connection refused"
    if any(s in text for s in ("name or service", "nodename", "getaddrinfo", "temporary failure in name")):
        return "host name not found (DNS)"
    return f"cannot connect ({cause or e})"


BODY_BYTES = 1024 * 1024  # a metadata reply read no further: a hostile server cannot fill memory


async def get_metadata(url: str, headers: dict[str, str], timeout_s: float, proxy: str | None,
                       redact: Callable[[str], str]) -> tuple[str | None, int, Any]:
    """A preflight's one GET, its redirects never followed: (why it failed, or None; the status; the
    JSON body, None when it is not JSON). Every preflight asks this way, so they fail alike."""
    import asyncio

    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session, \
                session.get(url, headers=headers, allow_redirects=False, proxy=proxy) as resp:
            raw = await resp.content.read(BODY_BYTES)
            status = resp.status
    except asyncio.TimeoutError:
        return f"no answer within {timeout_s:g} s", 0, None
    except aiohttp.ClientConnectorError as e:
        return redact(connect_cause(e)), 0, None
    except aiohttp.ClientError as e:
        return redact(f"{type(e).__name__}: {e}"), 0, None
    if 300 <= status < 400:
        return f"HTTP {status} redirect (not followed); check the base URL", status, None
    try:
        return None, status, json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, status, None
