"""The preflight of a `vertex/` model: credentials that mint a token, and the model's free metadata call.

Two steps, neither a generation: the application-default credentials are refreshed (a service
account's signed assertion exchanged for an access token at its `token_uri`: a refused key is named
here, before anything is written), then Vertex AI's publisher-model lookup
`GET {root}/v1/publishers/{google|anthropic}/models/{model}` (PublisherModelService.GetPublisherModel,
read 2026-11-27; free, needs `aiplatform.publisherModels.get` or roles/aiplatform.user) with that
token. 401 is a refused token, 403 PERMISSION_DENIED the account's missing role, 404 an unknown model:
each one line, exit 2, the first two said as refused credentials (not as a server that cannot be
reached), with the server's own reason. Anything else (a 5xx, a 429) is left to the runner's retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import quote

from evalkit.core.errors import server_reason
from evalkit.providers.base import ProviderSpec, public_url
from evalkit.providers.registry import is_claude
from evalkit.providers.vertex.auth import load_credentials, place_of
from evalkit.providers.vertex.client import VertexRedactor
from evalkit.providers.wire.connect import get_metadata


def model_url(spec: ProviderSpec, base: str) -> str:
    """The publisher-model lookup for the spec's model (Claude's publisher is anthropic). Pure."""
    publisher = "anthropic" if is_claude(spec.provider, spec.model) else "google"
    root = place_of(public_url(base)).root
    return f"{root}/v1/publishers/{publisher}/models/{quote(spec.model, safe='@')}"


class VertexProbe(NamedTuple):
    """What one Vertex endpoint's preflight found."""

    cause: str | None  # None: a token was minted and the lookup answers
    body: object  # the lookup's JSON body
    refused: bool = False  # the cause is the credentials: the token endpoint or Vertex refused them


def refresh_token(credentials: Any) -> tuple[str, bool] | None:
    """Mint an access token (blocking: google-auth's requests transport); when it fails, the cause and
    whether the credentials were refused (else the token endpoint could not be reached)."""
    import requests
    from google.auth import exceptions
    from google.auth.transport.requests import Request

    try:
        with requests.Session() as session:  # closed: no socket left open after the refresh
            credentials.refresh(Request(session))
    except exceptions.RefreshError as e:
        reason = e.args[0] if e.args else type(e).__name__
        return f"the token endpoint refused them: {server_reason(reason)}", True
    except exceptions.TransportError as e:
        return f"cannot reach the token endpoint ({type(e).__name__})", False
    return None


def judge(status: int, body: object, spec: ProviderSpec, project: str) -> str | None:
    """The cause, or None, from the lookup's reply. Pure."""
    err = body.get("error") if isinstance(body, dict) else None
    words = err.get("message") if isinstance(err, dict) and isinstance(err.get("message"), str) else ""
    if status == 401:
        return "HTTP 401: the access token was refused (UNAUTHENTICATED)"
    if status == 403:
        return (f"HTTP 403: PERMISSION_DENIED on project {project}: {server_reason(words)} (the account needs "
                "roles/aiplatform.user)")
    if status == 404 and spec.model in words:  # Vertex's own "Publisher Model … not found"; else a proxy: go on
        return f"HTTP 404: unknown model '{spec.model}' (not a Vertex AI publisher model here)"
    return None


async def probe_vertex(spec: ProviderSpec, base: str, env: Mapping[str, str], timeout_s: float) -> VertexProbe:
    """One Vertex endpoint's preflight (the module docstring)."""
    from evalkit.providers.openai.compat import proxy_for

    shown = public_url(base)
    place = place_of(shown)
    credentials = load_credentials(env, spec.label)  # a missing or unreadable file: EvalkitError, exit 2
    redact = VertexRedactor([], credentials)
    token_failed = await asyncio.to_thread(refresh_token, credentials)
    if token_failed is not None:
        return VertexProbe(redact(token_failed[0]), None, token_failed[1])
    url = model_url(spec, base)
    headers = {"Authorization": f"Bearer {credentials.token}"}
    failed, status, body = await get_metadata(url, headers, timeout_s, proxy_for(url), redact)
    if failed is not None:
        return VertexProbe(failed, None)
    cause = judge(status, body, spec, place.project)
    return VertexProbe(redact(cause) if cause else None, body, cause is not None and status in (401, 403))
