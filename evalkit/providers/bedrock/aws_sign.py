"""AWS credentials, region and SigV4 signing for `bedrock/` (botocore, imported only when used).

Credentials come from the variables the run was given (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN), else from botocore's standard chain (AWS_PROFILE and the shared config and
credentials files, SSO, web identity, container and instance roles). A chain's refreshable credentials
are frozen again for every request, so a long run outlives a temporary session. The region is
AWS_REGION (AWS_DEFAULT_REGION as botocore reads it); there is no default: a run without one is one line.

Signing is botocore's own `SigV4Auth` (service `bedrock`), on the exact bytes and URL sent. What a
signed request carries that is secret — the secret key, the session token (`X-Amz-Security-Token`)
and each request's `Signature=`, and the access key id with them — never reaches a message: `AwsRedactor` masks them, the per-request
signature by its shape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import EvalkitError, server_reason
from evalkit.core.sdk import import_sdk
from evalkit.providers.wire.redact import MASK, Redactor

SERVICE = "bedrock"  # the SigV4 signing name of bedrock-runtime
REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_SIGNED_SECRETS = re.compile(r"(?i)(signature=|x-amz-security-token[\"']?\s*[=:]\s*[\"']?)[0-9A-Za-z/+=%_-]{8,}")


class AwsRedactor(Redactor):
    """A Redactor that also masks any SigV4 signature and security token by their shape."""

    def __call__(self, text: str) -> str:
        text = super().__call__(text)
        return _SIGNED_SECRETS.sub(rf"\g<1>{MASK}", text) if text else text


def region_of(env: Mapping[str, str], label: str) -> str:
    """The region requests are signed for: AWS_REGION, else AWS_DEFAULT_REGION; one line when neither is set."""
    region = next((env[v].strip() for v in REGION_ENV if env.get(v, "").strip()), None)
    if region is None:
        raise EvalkitError(f"--model {label}: AWS_REGION is not set (the AWS region of Bedrock, e.g. us-east-1)")
    return region


@dataclass(frozen=True)
class AwsKeys:
    """Frozen credentials of one request."""

    access_key: str
    secret_key: str
    token: str | None


class AwsCredentials:
    """The run's credentials: fixed ones from its variables, or botocore's chain (refreshed as they expire)."""

    def __init__(self, env: Mapping[str, str], label: str):
        self._botocore = import_sdk("botocore", label)  # lazy: evalkit[bedrock]
        access, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
        self.from_env = bool(access and secret)
        if access and secret:
            from botocore.credentials import Credentials

            self._creds: Any = Credentials(access, secret, env.get("AWS_SESSION_TOKEN") or None)
        else:
            self._creds = _chain(env, label)
        self._last: AwsKeys | None = None
        self._redactors: list[AwsRedactor] = []  # taught every secret a refresh brings
        # the access key id is not a secret to AWS, but it names the account's user: masked as well
        self.secrets: tuple[str, ...] = ()
        self.keys()

    def keys(self) -> AwsKeys:
        frozen = self._creds.get_frozen_credentials()
        keys = AwsKeys(frozen.access_key, frozen.secret_key, frozen.token or None)
        if keys != self._last:  # the first keys, or a refresh (a temporary session renewed)
            self._last = keys
            new = [s for s in (keys.access_key, keys.secret_key, keys.token) if s and s not in self.secrets]
            self.secrets += tuple(new)
            for redactor in self._redactors:
                redactor.learn(new)
        return keys

    def redactor(self, more: Iterable[str | None] = ()) -> AwsRedactor:
        redactor = AwsRedactor([*self.secrets, *more])
        self._redactors.append(redactor)
        return redactor


def _chain(env: Mapping[str, str], label: str) -> Any:
    """botocore's credential chain for the profile the run names (AWS_PROFILE), or one line."""
    from botocore.exceptions import BotoCoreError
    from botocore.session import Session

    profile = env.get("AWS_PROFILE") or None
    try:
        creds = Session(profile=profile).get_credentials()
    except BotoCoreError as e:  # an unknown profile, an unreadable config file, a failed SSO refresh
        raise EvalkitError(f"--model {label}: AWS credentials could not be read ({type(e).__name__}: "
                           f"{server_reason(e)})") from None
    if creds is None:
        raise EvalkitError(f"--model {label}: no AWS credentials found (set AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or sign in with `aws sso login`)")
    return creds


def sign(keys: AwsKeys, region: str, method: str, url: str, body: bytes,
         headers: Mapping[str, str], body_sha256: str | None = None) -> dict[str, str]:
    """The headers to send: `headers` plus X-Amz-Date, X-Amz-Security-Token (with a session token) and
    Authorization, signed by botocore's SigV4Auth over exactly `url` and `body`. `body_sha256`: the body's
    hex sha256 when the caller has it already (else botocore hashes the body)."""
    from botocore.credentials import ReadOnlyCredentials

    request = _Signed(method, url, body, headers)
    if body_sha256 is not None:
        request.context["body_sha256"] = body_sha256
    _signer_class()(ReadOnlyCredentials(keys.access_key, keys.secret_key, keys.token), SERVICE, region).add_auth(request)
    return request.headers


class _Header(dict):
    """Lower-cased header names -> values, read as botocore's signer reads its HTTPHeaders (get_all)."""

    def get_all(self, name: str, failobj: Any = None) -> list[str]:
        return [self[name]] if name in self else failobj


class _Signed:
    """What SigV4Auth reads and writes of a request. botocore's own AWSRequest keeps its headers in an
    email.message-based mapping, whose copying and lookups cost most of a signature (about 0.8 ms a
    request, measured in bench/throughput.py): plain dicts here, the signing itself botocore's."""

    def __init__(self, method: str, url: str, body: bytes, headers: Mapping[str, str]):
        self.method, self.url, self.body = method, url, body
        self.headers: dict[str, str] = dict(headers)
        self.context: dict[str, Any] = {}
        self.params: dict[str, str] = {}


@functools.cache
def _signer_class() -> type:
    """botocore's SigV4Auth, choosing the headers to sign from a plain dict (same rule: every header but
    botocore's blacklist, and the host from the URL), with the URL's host worked out once per URL."""
    from botocore.auth import SIGNED_HEADERS_BLACKLIST, SigV4Auth, _host_from_url

    plain = SigV4Auth(None, SERVICE, "")  # botocore's own rules for what depends on the URL alone
    host_of = functools.lru_cache(maxsize=64)(_host_from_url)
    path_of = functools.lru_cache(maxsize=64)(plain._normalize_url_path)
    query_of = functools.lru_cache(maxsize=64)(lambda url: plain.canonical_query_string(_Url(url)))

    @functools.lru_cache(maxsize=16)
    def signing_key(secret: str, day: str, region: str) -> bytes:
        """The day's derived key (four HMACs), as SigV4Auth.signature derives it."""
        key = plain._sign(f"AWS4{secret}".encode(), day)
        for part in (region, SERVICE, "aws4_request"):
            key = plain._sign(key, part)
        return key

    class FastSigV4(SigV4Auth):
        def headers_to_sign(self, request: Any) -> _Header:
            chosen = _Header((k.lower(), v) for k, v in request.headers.items()
                             if k.lower() not in SIGNED_HEADERS_BLACKLIST)
            chosen.setdefault("host", host_of(request.url))
            return chosen

        def _normalize_url_path(self, path: str) -> str:
            return path_of(path)

        def canonical_query_string(self, request: Any) -> str:
            return query_of(request.url)

        def payload(self, request: Any) -> str:
            return request.context.get("body_sha256") or super().payload(request)

        def signature(self, string_to_sign: str, request: Any) -> str:
            key = signing_key(self.credentials.secret_key, request.context["timestamp"][0:8], self._region_name)
            return self._sign(key, string_to_sign, hex=True)

    return FastSigV4


class PrefixHasher:
    """sha256 of request bodies that start alike: the hash state after a body's head is kept (a few heads,
    newest first), so a body that starts with one only hashes what follows it. A Converse body with an
    image first starts with that image's base64: queries on one image hash it once."""

    def __init__(self, keep: int = 8):
        self._keep = keep
        self._heads: list[tuple[bytes, Any]] = []

    def hexdigest(self, body: bytes, head_end: int = 0) -> str:
        """The body's hex sha256; `head_end`: where its shareable head ends (0: none)."""
        import hashlib

        for head, state in self._heads:
            if body.startswith(head):
                h = state.copy()
                h.update(memoryview(body)[len(head):])
                return h.hexdigest()
        if head_end <= 0:
            return hashlib.sha256(body).hexdigest()
        state = hashlib.sha256(memoryview(body)[:head_end])
        self._heads.insert(0, (body[:head_end], state))
        del self._heads[self._keep:]
        h = state.copy()
        h.update(memoryview(body)[head_end:])
        return h.hexdigest()


class _Url:
    """A URL alone, as canonical_query_string reads a request without params."""

    params: dict[str, str] = {}  # noqa: RUF012 - read only

    def __init__(self, url: str):
        self.url = url
