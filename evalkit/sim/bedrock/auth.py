"""What Amazon Bedrock's runtime checks before it reads a body: the request's SigV4 signature.

With fixed test credentials (SimConfig.aws_keys), every `/model/…` route recomputes the signature the way
AWS does — botocore's own SigV4 signer over the method, the path as sent, the query, the headers the
request says it signed (`SignedHeaders=`), the body, and the request's `X-Amz-Date` — for service `bedrock`
and the server's region, and compares it with the one sent. Otherwise AWS's 403s, shaped as AWS shapes
them (an `x-amzn-ErrorType` header and a `{"message": …}` body; docs.aws.amazon.com/bedrock/latest/
APIReference/CommonErrors.html and the SigV4 guide, read 2026-11-27):

- no Authorization header: MissingAuthenticationTokenException "Missing Authentication Token";
- an access key or session token that is not the server's: UnrecognizedClientException;
- a scope for another region or service, a signature that differs, or a date more than 5 minutes off:
  InvalidSignatureException.

A Bedrock API key (SimConfig.api_key) is taken as `Authorization: Bearer`. Without test credentials and
without a key the routes are open, as the other dialects' are without `api_key`.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from evalkit.sim.extension import route_path
from evalkit.sim.machinery.aws_shapes import AwsTestKeys, aws_error

PREFIX = "/model/"
SERVICE = "bedrock"
MAX_SKEW_S = 300.0
_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request,\s*"
                   r"SignedHeaders=([a-z0-9;_.-]+),\s*Signature=([0-9a-f]{64})$")
MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.")
INVALID_TOKEN = "The security token included in the request is invalid."


def owns(request: web.Request) -> bool:
    """A Bedrock runtime route (or a twin of one): its credentials are checked here."""
    return route_path(request).startswith(PREFIX)


def _scope_problem(day: str, region: str, service: str, want_region: str, amz_date: str) -> str | None:
    if service != SERVICE:
        return f"Credential should be scoped to correct service: '{SERVICE}'."
    if region != want_region:
        return f"Credential should be scoped to a valid region. (it says '{region}')"
    if not amz_date.startswith(day):
        return "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP."
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return "X-Amz-Date is not an ISO-8601 basic timestamp (YYYYMMDD'T'HHMMSS'Z')."
    if abs((datetime.now(timezone.utc) - signed_at).total_seconds()) > MAX_SKEW_S:
        return f"Signature expired: {amz_date} is more than 5 minutes from the server's time."
    return None


def expected_signature(keys: AwsTestKeys, region: str, method: str, url: str, body: bytes,
                       signed: dict[str, str], amz_date: str) -> str:
    """The signature botocore's SigV4 signer computes for this request (what AWS recomputes)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import ReadOnlyCredentials

    request = AWSRequest(method=method, url=url, data=body, headers=signed)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(ReadOnlyCredentials(keys.access_key, keys.secret_key, keys.token), SERVICE, region)
    return signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)


async def check_sigv4(request: web.Request, keys: AwsTestKeys, region: str) -> web.Response | None:
    """None when the request is signed by `keys` for `region`; else AWS's 403."""
    auth = request.headers.get("Authorization")
    if not auth:
        return aws_error(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    match = _AUTH.match(auth.strip())
    if match is None:
        return aws_error(403, "IncompleteSignatureException",
                         "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
    access, day, scope_region, service, signed_names, signature = match.groups()
    if access != keys.access_key or request.headers.get("X-Amz-Security-Token") != keys.token:
        return aws_error(403, "UnrecognizedClientException", INVALID_TOKEN)
    amz_date = request.headers.get("X-Amz-Date", "")
    problem = _scope_problem(day, scope_region, service, region, amz_date)
    if problem is not None:
        return aws_error(403, "InvalidSignatureException", problem)
    names = signed_names.split(";")
    if "host" not in names or any(n not in request.headers for n in names):
        return aws_error(403, "InvalidSignatureException", MISMATCH)
    signed = {n: ",".join(request.headers.getall(n)) for n in names}
    url = f"{request.scheme}://{request.headers['Host']}{request.raw_path}"
    want = expected_signature(keys, region, request.method, url, await request.read(), signed, amz_date)
    if not hmac.compare_digest(want, signature):
        return aws_error(403, "InvalidSignatureException", MISMATCH)
    return None


def bedrock_gate(keys: AwsTestKeys | None, region: str, api_key: str | None
                 ) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Middleware: Bedrock's routes need a SigV4 signature by `keys` (or `api_key` as a bearer token)."""

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        if not owns(request) or (keys is None and not api_key):
            return await handler(request)
        auth = request.headers.get("Authorization", "")
        if api_key and auth.startswith("Bearer "):
            if hmac.compare_digest(auth.encode(), f"Bearer {api_key}".encode()):
                return await handler(request)
            return aws_error(403, "UnrecognizedClientException", INVALID_TOKEN)
        if keys is None:
            return aws_error(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
        refused = await check_sigv4(request, keys, region)
        return refused if refused is not None else await handler(request)

    return gate
