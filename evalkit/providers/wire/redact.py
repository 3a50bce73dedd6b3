"""Keep credentials out of everything a provider hands back: error messages and answers alike.

A server or proxy that echoes the request's key (in an error message, or a reply) must not get it
into records.jsonl, summary.json, report.md or the console. Each provider knows its own key and
passes every message through its `Redactor`, which removes the key in the forms a server is
likely to repeat it (as sent, percent-encoded, base64, JSON-escaped) and the `user:pass@` part of
any URL.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

from evalkit.core.errors import ProviderError

MASK = "***"
_MIN_SECRET = 4  # shorter values would mask ordinary words
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@")


def _forms(secret: str) -> set[str]:
    raw = secret.encode()
    b64 = base64.b64encode(raw).decode()
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), json.dumps(secret)[1:-1],
             b64, b64.rstrip("="), urlsafe, urlsafe.rstrip("=")}
    return {f for f in forms if len(f) >= _MIN_SECRET}


class Redactor:
    """Masks the given secrets (and their common encodings) and URL userinfo in text."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        self._forms: list[str] = []
        self.learn(secrets)

    def learn(self, secrets: Iterable[str | None]) -> None:
        """Mask these too (credentials that were refreshed during the run)."""
        forms = set(self._forms)
        for s in secrets:
            if s and len(s.strip()) >= _MIN_SECRET:
                forms |= _forms(s.strip())
        self._forms = sorted(forms, key=len, reverse=True)  # longest first: no partial leftovers

    def __call__(self, text: str) -> str:
        if not text:
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return _USERINFO.sub(rf"\g<1>{MASK}@", text) if "@" in text else text

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self(text)

    def error(self, error: ProviderError) -> ProviderError:
        """The same error (kind, status, wait, cause) with its message redacted."""
        error.message = self(error.message)
        error.args = (error.message,)
        return error


def url_credentials(url: str) -> list[str]:
    """The secrets in a URL's userinfo: the password, and `user:password` (sent base64-encoded as
    Basic auth)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if not parts.password:
        return []
    password = unquote(parts.password)
    return [password, f"{unquote(parts.username or '')}:{password}"]


def without_userinfo(url: str) -> str:
    """A URL with any `user:pass@` masked, for messages that name a URL."""
    return _USERINFO.sub(rf"\g<1>{MASK}@", url)
