"""Error classification shared by the official SDKs (openai, anthropic): both raise the same
family of exceptions (timeout, connection, status with headers, response validation).

evalkit's own HTTP hooks (sdk_http) raise ProviderErrors from inside the SDK's client, which the
SDK may wrap (as a connection error): the one in the causes wins. A 3xx that reaches the SDK is a
redirect not followed. Messages carry the server's own words, trimmed; the provider redacts them.
"""

from __future__ import annotations

from types import ModuleType

from evalkit.core.errors import ProviderError, classify_status, retry_after_from_headers, server_reason
from evalkit.providers.wire.http_limits import is_redirect, redirect_refused
from evalkit.providers.wire.rate_headers import rate_info
from evalkit.providers.wire.reply_json import malformed


def provider_error_in(exc: BaseException | None) -> ProviderError | None:
    """The first ProviderError among an exception and its causes (an SDK's wrapping of evalkit's own)."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, ProviderError):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _server_words(body: object) -> str:
    """The message of an error body ({"error": {"message": ...}}), one line, trimmed."""
    err = body.get("error") if isinstance(body, dict) else None
    msg = err.get("message") if isinstance(err, dict) else None
    return server_reason(msg) if isinstance(msg, str) else ""


def sdk_error(sdk: ModuleType, exc: BaseException) -> ProviderError | None:
    """The ProviderError for an SDK exception, or None when it is not the SDK's (re-raise it)."""
    own = provider_error_in(exc)
    if own is not None:
        return own
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderError("timeout", "request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderError("transient", f"connection error: {type(exc).__name__}")
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        if is_redirect(status):
            return redirect_refused(status, exc.response.headers.get("location"), str(exc.response.url))
        words = _server_words(getattr(exc, "body", None))
        return ProviderError(classify_status(status), f"HTTP {status}: {type(exc).__name__}" + (f": {words}" if words else ""),
                             status=status, retry_after=retry_after_from_headers(exc.response.headers),
                             limits=rate_info(exc.response.headers))
    if isinstance(exc, sdk.APIResponseValidationError | ValueError):
        return malformed(f"unreadable ({type(exc).__name__})")
    return None
