"""Bedrock's errors, classified once for both of its routes (Converse and Claude's invoke).

Bedrock names an error in the `x-amzn-ErrorType` header (`ThrottlingException:http://internal.amazon.com/…`)
and puts its words in the body's `message` (docs.aws.amazon.com/bedrock/latest/APIReference/
API_runtime_Converse.html#API_runtime_Converse_Errors and CommonErrors.html, read 2026-11-27):

- ThrottlingException (429) is the rate limit: waited out, and it feeds the adaptive limits.
- ModelNotReadyException (429), ServiceUnavailableException (503), InternalServerException (500),
  ModelErrorException (424), ModelTimeoutException (408): the same request may succeed later.
- ValidationException (400): a bad request, never asked again.
- AccessDeniedException, UnrecognizedClientException, InvalidSignatureException, ExpiredTokenException (403)
  and ResourceNotFoundException (404): only the user can fix them. Their message names the model, so the
  request that confirms the model (evalkit.ask.confirm) stops the run with exit 2 on them.
- ServiceQuotaExceededException (400): the account's quota, waited out as a rate limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalkit.core.errors import ProviderError, classify_status, server_reason

KINDS = {
    "ThrottlingException": "rate_limit",
    "ServiceQuotaExceededException": "rate_limit",
    "ModelNotReadyException": "transient",
    "ServiceUnavailableException": "transient",
    "InternalServerException": "transient",
    "ModelErrorException": "transient",
    "ModelTimeoutException": "timeout",
    "ModelStreamErrorException": "transient",
    "ValidationException": "permanent",
}
NEEDS_USER = ("AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
              "ExpiredTokenException", "ResourceNotFoundException")
_MODEL_WORDS = ("model identifier", "model id", "model_id")  # a ValidationException about the model's name


def error_type(headers: Mapping[str, str] | Any, body: object) -> str | None:
    """The error's name: the `x-amzn-ErrorType` header before its `:`, else the body's `__type`."""
    raw = headers.get("x-amzn-ErrorType") or headers.get("x-amzn-errortype")
    if not raw and isinstance(body, dict):
        raw = body.get("__type") or body.get("code")
    if not isinstance(raw, str) or not raw:
        return None
    return raw.partition(":")[0].rpartition("#")[2] or None


def _words(body: object, text: str) -> str:
    message = None
    if isinstance(body, dict):
        message = body.get("message") or body.get("Message")
        error = body.get("error")
        if message is None and isinstance(error, dict):  # the Anthropic shape, from a proxy in between
            message = error.get("message")
    return server_reason(message if isinstance(message, str) else text)


def bedrock_error(status: int, headers: Mapping[str, str] | Any, raw: bytes | str, model: str) -> ProviderError:
    """The ProviderError for a Bedrock error reply (status, headers, body), its message naming the model
    where the user must act on it. Pure."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        body: object = json.loads(text)
    except ValueError:
        body = None
    name = error_type(headers, body)
    words = _words(body, text)
    kind = KINDS.get(name or "") or ("permanent" if name in NEEDS_USER else classify_status(status))
    about_model = name in NEEDS_USER or (name == "ValidationException" and any(w in words.lower() for w in _MODEL_WORDS))
    message = f"HTTP {status}: {name or 'error'}" + (f": {words}" if words else "")
    if about_model:
        message += f" (model '{model}')"
    return ProviderError(kind, message, status=status)
