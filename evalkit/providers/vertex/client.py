"""`vertex/<model>`: Gemini and Claude on Google Cloud's Vertex AI, through the official SDKs.

- `vertex/gemini-…` (any model not named `claude-…`): google-genai's client with `vertexai=True`,
  the project and location of the spec and application-default credentials; it posts to
  `{root}/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent`. The Gemini
  adapter (providers/google/client.py) is reused whole: request, thinking, reply checks, continuation.
- `vertex/claude-…`: the anthropic SDK's AsyncAnthropicVertex; it posts the Messages body to
  `{root}/v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict`, the model in the
  path and `anthropic_version: vertex-2023-10-16` in the body (docs.claude.com "Claude on Vertex AI",
  read 2026-11-27). The Anthropic adapter (providers/anthropic/client.py) is reused whole.

Both SDKs hold the same google-auth credentials (vertex_auth); evalkit refreshes the access token (valid
about an hour) before they would, one refresh for every request in flight (FreshToken). Every message
and answer either hands back goes through a VertexRedactor: the current access token, any `ya29.` token
or `Authorization: Bearer` value, and a service account's private key and key id never reach a record,
log or report.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalkit.core.errors import ProviderError, server_reason
from evalkit.core.sdk import import_sdk
from evalkit.core.tiers import STANDARD
from evalkit.core.types import GenParams, Message, Response
from evalkit.images.pipeline import PreparedImage
from evalkit.providers.anthropic.client import AnthropicProvider
from evalkit.providers.base import ProviderSpec
from evalkit.providers.google.client import GoogleProvider
from evalkit.providers.registry import is_claude
from evalkit.providers.vertex.auth import Place, credential_secrets, load_credentials, place_of
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES
from evalkit.providers.wire.redact import MASK, Redactor, url_credentials

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"  # the body's anthropic_version on Vertex AI (Anthropic's docs)
_TOKEN = re.compile(r"ya29\.[0-9A-Za-z_\-.]+")
_BEARER = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?bearer\s+)[^\s\"',;]+")  # not "the bearer of" in an answer
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)
_KEY_ID = re.compile(r"(\"?private_key_id\"?\s*[:=]\s*\"?)[0-9A-Fa-f]{8,}")


class VertexRedactor(Redactor):
    """A Redactor that also masks the credential's secrets as they are now (the token changes on each
    refresh) and the shapes of Google credentials wherever they appear."""

    def __init__(self, secrets: Iterable[str | None], credentials: Any):
        super().__init__(secrets)
        self._credentials = credentials

    def __call__(self, text: str) -> str:
        if not text:
            return text
        now = Redactor(credential_secrets(self._credentials))
        text = now(super().__call__(text))
        text = _PEM.sub(MASK, text)
        text = _KEY_ID.sub(rf"\g<1>{MASK}", text)
        text = _BEARER.sub(rf"\g<1>{MASK}", text)
        return _TOKEN.sub(MASK, text)


def _secrets(spec: ProviderSpec) -> list[str]:
    return [s for u in spec.base_urls for s in url_credentials(u)]


class FreshToken:
    """One token refresh at a time for all of a run's requests (the SDKs would each start one when
    requests go out together), its failures classified: a refused credential needs the user, an
    unreachable token endpoint is transient."""

    def __init__(self, credentials: Any, redact: Redactor):
        self._credentials, self._redact = credentials, redact
        self._lock = asyncio.Lock()

    def _stale(self) -> bool:
        return not self._credentials.token or bool(self._credentials.expired)

    async def __call__(self) -> None:
        if not self._stale():
            return
        async with self._lock:
            if self._stale():
                await asyncio.to_thread(self._refresh)

    def _refresh(self) -> None:
        import requests
        from google.auth import exceptions
        from google.auth.transport.requests import Request

        try:
            with requests.Session() as session:  # closed: no socket left open after the refresh
                self._credentials.refresh(Request(session))
        except exceptions.RefreshError as e:
            reason = server_reason(e.args[0] if e.args else type(e).__name__)
            raise ProviderError("permanent", self._redact(f"credentials refused by the token endpoint: {reason}")) from None
        except exceptions.TransportError as e:
            raise ProviderError("transient", f"cannot reach the token endpoint ({type(e).__name__})") from None


def needs_the_user(error: ProviderError, model: str, place: Place) -> ProviderError:
    """A 403 or 404 on the model's route said as what the user must fix, naming the model (so the run's
    first request, which confirms the model, stops the run on it: exit 2, nothing else sent)."""
    # the server's words first (the adapter's "HTTP 403: PERMISSION_DENIED: …"), then what evalkit adds
    if error.status == 403:
        error.message = (f"{error.message} (project {place.project} in {place.location} may not use model "
                         f"'{model}': the account needs roles/aiplatform.user; a Claude model must be enabled in "
                         "Model Garden)")
    elif error.status == 404:
        error.message = (f"{error.message} (model '{model}' is not served to project {place.project} in "
                         f"{place.location})")
    error.args = (error.message,)
    return error


class _OnVertex:
    """What Gemini and Claude on Vertex AI add to their vendor's adapter: the project and location, the
    credentials, a fresh token before each request, and the errors that need the user."""

    spec: ProviderSpec

    def __init__(self, spec: ProviderSpec, *, place: Place, credentials: Any, timeout_s: float = 120.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        self.place, self._credentials = place, credentials
        super().__init__(spec, api_key="", timeout_s=timeout_s, max_response_bytes=max_response_bytes)
        self._redact = VertexRedactor(_secrets(spec), credentials)
        self._fresh = FreshToken(credentials, self._redact)

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        await self._fresh()
        try:
            return await super().complete(messages, params, images)
        except ProviderError as e:
            raise needs_the_user(e, self.spec.model, self.place) from e.__cause__


class VertexGemini(_OnVertex, GoogleProvider):
    """Gemini on Vertex AI: the Gemini adapter with google-genai's Vertex client."""

    def _make_client(self, genai: Any, options: Any, api_key: str) -> Any:
        del api_key  # Vertex AI takes an OAuth token, never a key
        options.base_url = self.place.root
        return genai.Client(vertexai=True, credentials=self._credentials, project=self.place.project,
                            location=self.place.location, http_options=options)


class VertexClaude(_OnVertex, AnthropicProvider):
    """Claude on Vertex AI: the Anthropic adapter with the SDK's AsyncAnthropicVertex client."""

    body_fields = {"anthropic_version": VERTEX_ANTHROPIC_VERSION}  # noqa: RUF012 - read only

    def _make_client(self, anthropic: Any, kwargs: dict[str, Any]) -> Any:
        kwargs.pop("api_key", None)
        return anthropic.AsyncAnthropicVertex(region=self.place.location, project_id=self.place.project,
                                              credentials=self._credentials, base_url=self.place.root + "/v1",
                                              **kwargs)

    def body(self, messages: Any, params: Any, images: Any) -> dict:
        raise ProviderError("permanent", "vertex/: no batch API in evalkit")

    async def complete(self, messages: Sequence[Message], params: GenParams,
                       images: Sequence[PreparedImage]) -> Response:
        """Vertex's tiers are Gemini's (providers/tiers.py VERTEX_TIERS): a tier asked of Claude is refused as the
        bad request it would be, before anything is sent, so the run stops at its first query (exit 2)."""
        if params.service_tier not in (None, STANDARD):
            raise ProviderError("permanent", f"Claude on Vertex AI sells no service tier ({params.service_tier}): "
                                             "Vertex's Flex and Priority PayGo are Gemini's", status=400)
        return await super().complete(messages, params, images)


def vertex_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> VertexGemini | VertexClaude:
    """The client its record names: Claude through the anthropic SDK, anything else through google-genai."""
    del api_key  # the credentials are application-default ones (vertex_auth)
    place = place_of(spec.base_urls[0])
    credentials = load_credentials(env, spec.label)
    if is_claude(spec.provider, spec.model):  # Anthropic's publisher; every other name is asked as Gemini
        import_sdk("anthropic.lib.vertex", f"{spec.label} (pip install 'evalkit[vertex]')")
        return VertexClaude(spec, place=place, credentials=credentials, timeout_s=timeout_s,
                            max_response_bytes=max_response_bytes)
    return VertexGemini(spec, place=place, credentials=credentials, timeout_s=timeout_s,
                        max_response_bytes=max_response_bytes)
