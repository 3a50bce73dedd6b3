"""Google service accounts the simulated server knows, and the check of the assertions they sign.

A service account's key file holds an RSA private key, its id and the account's e-mail; google-auth
signs a JWT with it (RS256: header `kid` = the key id; claims `iss` = the e-mail, `scope`, `aud` = the
file's `token_uri`, `iat`, `exp`) and posts it to `token_uri` with the JWT-bearer grant (RFC 7523) for
an access token. The simulator is given the public half only (ServiceAccount) and checks the signature
with it, as Google's token endpoint does (developers.google.com/identity/protocols/oauth2/service-account,
"Making the access token request", read 2026-11-27).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from typing import Any

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # the audience google-auth signs for, whatever token_uri is
MAX_LIFETIME_S = 3600  # Google refuses an assertion that lives longer than an hour
CLOCK_SKEW_S = 300


class BadAssertion(ValueError):
    """Why an assertion is refused (the token endpoint's error_description)."""


@dataclass(frozen=True)
class ServiceAccount:
    """The public side of a service account: what the token endpoint checks an assertion against.
    `allowed`: False for an account without a Vertex AI role (its calls are 403 PERMISSION_DENIED)."""

    email: str
    key_id: str
    public_pem: str
    allowed: bool = True


def _b64url(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise BadAssertion("Invalid JWT: not base64url") from None


def _json(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64url(part))
    except (UnicodeDecodeError, ValueError):
        raise BadAssertion("Invalid JWT: not JSON") from None
    if not isinstance(value, dict):
        raise BadAssertion("Invalid JWT: not a JSON object")
    return value


def verify_assertion(assertion: str, accounts: tuple[ServiceAccount, ...], audience: str,
                     now: float | None = None) -> ServiceAccount:
    """The account whose key signed `assertion` for `audience` (the token endpoint's URL), or BadAssertion."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    parts = assertion.split(".")
    if len(parts) != 3:
        raise BadAssertion("Invalid JWT: expected three parts")
    header, claims = _json(parts[0]), _json(parts[1])
    if header.get("alg") != "RS256":
        raise BadAssertion("Invalid JWT: alg must be RS256")
    account = next((a for a in accounts if a.email == claims.get("iss")), None)
    if account is None:
        raise BadAssertion("Invalid JWT: unknown issuer")
    if header.get("kid") not in (None, account.key_id):
        raise BadAssertion("Invalid JWT Signature.")
    key = serialization.load_pem_public_key(account.public_pem.encode())
    try:
        key.verify(_b64url(parts[2]), f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),  # type: ignore[call-arg, union-attr]
                   hashes.SHA256())
    except InvalidSignature:
        raise BadAssertion("Invalid JWT Signature.") from None
    now = time.time() if now is None else now
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int | float) or not isinstance(exp, int | float):
        raise BadAssertion("Invalid JWT: iat and exp are required")
    if exp < now - CLOCK_SKEW_S or iat > now + CLOCK_SKEW_S or exp - iat > MAX_LIFETIME_S:
        raise BadAssertion("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
    if claims.get("aud") not in (audience, GOOGLE_TOKEN_URI):
        raise BadAssertion(f"Invalid JWT: aud must be {GOOGLE_TOKEN_URI}")
    if CLOUD_PLATFORM not in str(claims.get("scope", "")).split():
        raise BadAssertion("Invalid JWT: the cloud-platform scope is required")
    return account
