"""A failed connection, said plainly: "connection refused", "host name not found (DNS)", a TLS failure.

The preflight and the chat-completions adapter name the same causes the same way, so the error
banner and the circuit breaker group them (and a user reads the cause, not an exception class).
"""

from __future__ import annotations

import errno


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
