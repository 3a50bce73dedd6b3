"""What ties a cached answer to its request key, so that a cache cannot answer one question with another's
answer: every entry written since 0.4 carries `bound`, and with EVALKIT_CACHE_SECRET an HMAC (docs/scale.md).

    canonical body = the entry's JSON object without "bound" and "hmac", keys sorted, separators "," and
                     ":", non-ASCII characters as themselves, as UTF-8 (evalkit.ask.request_key.canonical_json)
    bound          = hex sha256(UTF-8 request key ‖ canonical body)
    hmac           = hex HMAC-SHA256(UTF-8 secret, UTF-8 request key ‖ canonical body)

A read checks one sha256 (and one HMAC with a secret); an entry that fails is a miss, asked again and
overwritten. Entries of 0.1–0.3 carry neither field: paid for, they are served as before, except when only
signed entries may be (--cache-signed-only or EVALKIT_CACHE_SIGNED_ONLY=1).

Binding catches swapped and damaged entries, not a writer who knows this format (it is documented); only a
secret, with signed-only, stops a writer who lacks it. The secret is held here and nowhere else: never in a
repr, a message or a file.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from evalkit.ask.request_key import canonical_json
from evalkit.core.errors import EvalkitError

BOUND = "bound"
SIGNATURE = "hmac"
SECRET_VAR = "EVALKIT_CACHE_SECRET"
SIGNED_ONLY_VAR = "EVALKIT_CACHE_SIGNED_ONLY"

# what `cache verify` calls an entry that would not be served (None: served)
SWAPPED = "swapped"  # another key's answer, intact
ALTERED = "altered"  # its body is not the one its `bound` was computed over
UNSIGNED = "unsigned"  # no `bound` (written by 0.1-0.3): served unless signed-only
BADLY_SIGNED = "wrong signature"  # with a secret: the HMAC is missing or not the secret's
UNBOUND = "unbound"  # a read's word for swapped-or-altered (telling them apart costs more than a read)

PAIR_LIMIT = 2000  # verify looks for the key a moved answer belongs to among at most this many unbound entries

_SEAL_TAIL = re.compile(f'"{BOUND}":"[0-9a-f]{{64}}"(?:,"{SIGNATURE}":"[0-9a-f]{{64}}")?}}')
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def _body(value: Mapping[str, Any]) -> bytes:
    """The canonical body (see the module docstring); TypeError for a value that is not portable JSON."""
    try:
        text = canonical_json({k: v for k, v in value.items() if k != BOUND and k != SIGNATURE})
    except ValueError as e:  # NaN/inf or a circular reference
        raise TypeError(f"cache value is not JSON-serialisable: {e}") from e
    return text.encode("utf-8", "surrogatepass")


def unsealed(value: dict[str, Any]) -> dict[str, Any]:
    """The answer as it was given to the cache: the value read, without its seal (removed in place)."""
    value.pop(BOUND, None)
    value.pop(SIGNATURE, None)
    return value


def _written_body(text: str) -> bytes | None:
    """The canonical body as sealed_text() wrote it (the text up to the seal, closed), else None. The text
    is hashed as stored: only a body that hashes to `bound` under the key is taken as it is."""
    at = text.rfind(f'"{BOUND}":"')
    if at < 1 or _SEAL_TAIL.fullmatch(text, at) is None:
        return None
    head = text[:at]
    if head == "{":
        return b"{}"
    return (head[:-1] + "}").encode("utf-8", "surrogatepass") if head.endswith(",") else None


def bound_of(key: str, body: bytes) -> str:
    return hashlib.sha256(key.encode("utf-8") + body).hexdigest()


@dataclass(frozen=True)
class CacheSeal:
    """How a run's caches seal what they write and check what they read."""

    secret: bytes | None = field(default=None, repr=False)
    signed_only: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str], signed_only: bool = False) -> CacheSeal:
        """EVALKIT_CACHE_SECRET (empty: none) and EVALKIT_CACHE_SIGNED_ONLY (or the flag)."""
        word = (env.get(SIGNED_ONLY_VAR) or "").strip().lower()
        if word not in _TRUE + _FALSE:
            raise EvalkitError(f"{SIGNED_ONLY_VAR}={env.get(SIGNED_ONLY_VAR)!r}: expected 1 or 0")
        secret = env.get(SECRET_VAR) or None
        return cls(secret.encode("utf-8") if secret else None, signed_only or word in _TRUE)

    def _mac(self, key: str, body: bytes) -> str:
        assert self.secret is not None
        return hmac.new(self.secret, key.encode("utf-8") + body, hashlib.sha256).hexdigest()

    def sealed_text(self, key: str, value: dict[str, Any]) -> str:
        """The JSON text stored for `value` under `key`: its canonical body with `bound` (and `hmac`) added
        last. TypeError for anything that would not round-trip, before anything is written."""
        if type(key) is not str:
            raise TypeError(f"cache keys must be str, got {type(key).__name__}")
        if not isinstance(value, dict):
            raise TypeError(f"cache values must be dicts, got {type(value).__name__}")
        body = _body(value)
        text = body.decode("utf-8", "surrogatepass")
        tail = f'"{BOUND}":"{bound_of(key, body)}"'
        if self.secret is not None:
            tail += f',"{SIGNATURE}":"{self._mac(key, body)}"'
        return text[:-1] + ("," if text != "{}" else "") + tail + "}"

    def refusal(self, key: str, value: Mapping[str, Any], text: str | None = None) -> str | None:
        """Why the entry read under `key` must not be served (UNBOUND, UNSIGNED, BADLY_SIGNED), or None.
        `text`, the entry as stored, spares re-encoding the body when it is as sealed_text() wrote it."""
        bound = value.get(BOUND)
        if bound is None:
            return UNSIGNED if self.signed_only else None  # 0.1-0.3's: paid for
        if not isinstance(bound, str):
            return UNBOUND
        body = _written_body(text) if text is not None else None
        if body is None or not hmac.compare_digest(bound, bound_of(key, body)):
            try:
                body = _body(value)
            except TypeError:
                return UNBOUND
            if not hmac.compare_digest(bound, bound_of(key, body)):
                return UNBOUND
        if self.secret is not None:
            mac = value.get(SIGNATURE)
            if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(key, body)):
                return BADLY_SIGNED
        return None


def audit(entries: Iterable[tuple[str, Mapping[str, Any]]], seal: CacheSeal) -> dict[str, str]:
    """`cache verify`'s verdict on every entry that would not be served, by key: SWAPPED (the intact answer
    of another key of this cache, found by its `bound`), ALTERED, UNSIGNED (whether or not the seal serves
    them: the caller says) or BADLY_SIGNED. An answer moved from a key this cache no longer holds reads as
    ALTERED; so do moved answers beyond PAIR_LIMIT."""
    strict = replace(seal, signed_only=True)
    verdicts: dict[str, str] = {}
    holder: dict[str, str] = {}  # bound -> a key whose entry is bound to it (a copy elsewhere carries it too)
    unbound: dict[str, tuple[bytes, str]] = {}  # key -> (body, bound)
    for key, value in entries:
        why = strict.refusal(key, value)
        bound = value.get(BOUND)
        if isinstance(bound, str) and why != UNBOUND:
            holder.setdefault(bound, key)
        if why == UNBOUND:
            try:
                unbound[key] = (_body(value), bound if isinstance(bound, str) else "")
            except TypeError:
                verdicts[key] = ALTERED
        elif why is not None:
            verdicts[key] = why
    for key, (body, bound) in unbound.items():
        verdicts[key] = SWAPPED if _source(key, body, bound, holder, unbound) else ALTERED
    return verdicts


def _source(key: str, body: bytes, bound: str, holder: Mapping[str, str],
            unbound: Mapping[str, tuple[bytes, str]]) -> bool:
    """Whether `body` is the answer of another key: one whose entry carries the same `bound` (a copy), or,
    among a cache's unbound entries (answers moved round among them), one whose key it was sealed with."""
    if not bound:
        return False
    other = holder.get(bound)
    if other is not None and other != key and bound_of(other, body) == bound:
        return True
    if len(unbound) > PAIR_LIMIT:
        return False
    return any(k != key and bound_of(k, body) == bound for k in unbound)


def seal_counts(counts: Mapping[str, int], seal: CacheSeal) -> str:
    """`cache verify`'s words for the entries a run would not serve, each kind apart, zeros included."""
    served = "refused: --cache-signed-only" if seal.signed_only else "served: paid for"
    words = [f"{counts.get(SWAPPED, 0):,} swapped (another key's answer)",
             f"{counts.get(ALTERED, 0):,} altered (not the answer sealed under the key)",
             f"{counts.get(UNSIGNED, 0):,} unsigned (written before 0.4; {served})"]
    if seal.secret is not None:
        words.append(f"{counts.get(BADLY_SIGNED, 0):,} with a wrong or missing signature")
    return ", ".join(words)


def rejected_line(n: int) -> str:
    """What a run says when it refused cached entries (summary.json `cache.rejected`)."""
    return (f"{n:,} cached answers did not match their request keys (swapped, altered, or not signed as required) "
            "and were asked again; whoever can write to the cache can change scores (docs/scale.md)")
