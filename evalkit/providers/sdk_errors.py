"""Error classification shared by the official SDKs (openai, anthropic): both raise the same
family of exceptions (timeout, connection, status with headers, response validation)."""

from __future__ import annotations

from types import ModuleType

from evalkit.core.errors import ProviderError, classify_status
from evalkit.providers.openai_compat import retry_after_from_headers


def sdk_error(sdk: ModuleType, exc: BaseException) -> ProviderError | None:
    """The ProviderError for an SDK exception, or None when it is not the SDK's (re-raise it)."""
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderError("timeout", "request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderError("transient", f"connection error: {type(exc).__name__}")
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        return ProviderError(classify_status(status), f"HTTP {status}: {type(exc).__name__}", status=status,
                             retry_after=retry_after_from_headers(exc.response.headers))
    if isinstance(exc, sdk.APIResponseValidationError | ValueError):
        return ProviderError("transient", "malformed response body")
    return None
