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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import import_sdk
from evalkit.providers.redact import MASK, Redactor

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
        keys = self.keys()
        # the access key id is not a secret to AWS, but it names the account's user: masked as well
        self.secrets: tuple[str, ...] = tuple(s for s in (keys.access_key, keys.secret_key, keys.token) if s)

    def keys(self) -> AwsKeys:
        frozen = self._creds.get_frozen_credentials()
        return AwsKeys(frozen.access_key, frozen.secret_key, frozen.token or None)

    def redactor(self, more: Iterable[str | None] = ()) -> AwsRedactor:
        return AwsRedactor([*self.secrets, *more])


def _chain(env: Mapping[str, str], label: str) -> Any:
    """botocore's credential chain for the profile the run names (AWS_PROFILE), or one line."""
    from botocore.exceptions import BotoCoreError
    from botocore.session import Session

    profile = env.get("AWS_PROFILE") or None
    try:
        creds = Session(profile=profile).get_credentials()
    except BotoCoreError as e:  # an unknown profile, an unreadable config file, a failed SSO refresh
        raise EvalkitError(f"--model {label}: AWS credentials could not be read ({type(e).__name__}: "
                           f"{' '.join(str(e).split())[:200]})") from None
    if creds is None:
        raise EvalkitError(f"--model {label}: no AWS credentials found (set AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or sign in with `aws sso login`)")
    return creds


def sign(keys: AwsKeys, region: str, method: str, url: str, body: bytes,
         headers: Mapping[str, str]) -> dict[str, str]:
    """The headers to send: `headers` plus X-Amz-Date, X-Amz-Security-Token (with a session token) and
    Authorization, signed by botocore's SigV4Auth over exactly `url` and `body`."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import ReadOnlyCredentials

    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    SigV4Auth(ReadOnlyCredentials(keys.access_key, keys.secret_key, keys.token), SERVICE, region).add_auth(request)
    return {k: v for k, v in request.headers.items() if v is not None}
