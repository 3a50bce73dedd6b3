"""`azure/<deployment>`: Azure OpenAI chat completions, over the same aiohttp client as `openai/`.

Azure serves OpenAI's wire format on its own routes (learn.microsoft.com/azure/ai-foundry/openai/reference,
/api-version-lifecycle, read 2026-11-26):

- with an API version (`--api-version`, else `OPENAI_API_VERSION`), the classic route
  `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=…`;
- without one, the v1 API `{endpoint}/openai/v1/chat/completions`, the deployment sent as `model`;
- the Responses API (`--api responses`; issue 47) on the v1 API only, `{endpoint}/openai/v1/responses`, the
  deployment as `model`, with or without an API version (the v1 API takes none).

Both reach the same deployment, so both share one cache endpoint: endpoint + deployment, without the API
version (the version shapes the API, not the model that answers; evalkit sends the same body either way,
and a new version must not make a user pay again for answers they hold).

The key travels in the `api-key` header only, never as a bearer token. Without a key, Microsoft Entra ID:
a token in `AZURE_OPENAI_AD_TOKEN` (the openai SDK's variable), or, with `evalkit[azure-entra]` installed,
azure-identity's DefaultAzureCredential (imported only then), sent as `Authorization: Bearer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import SdkMissing, import_sdk
from evalkit.providers.base import ProviderSpec, azure_endpoint
from evalkit.providers.openai.api import fixed_temperature
from evalkit.providers.openai.compat import OpenAICompatProvider
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES

API_VERSION_ENV = "OPENAI_API_VERSION"
ENTRA_TOKEN_ENV = "AZURE_OPENAI_AD_TOKEN"
ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"  # Azure OpenAI's token audience


def chat_base(endpoint: str, deployment: str, api_version: str | None) -> tuple[str, str]:
    """(base URL, route) of the chat call: the classic route with an API version, else the v1 API. Pure."""
    root = azure_endpoint(endpoint)
    if api_version:
        return (f"{root}/openai/deployments/{quote(deployment, safe='')}",
                f"/chat/completions?api-version={quote(api_version, safe='')}")
    return f"{root}/openai/v1", "/chat/completions"


def api_version_of(env: Mapping[str, str]) -> str | None:
    return env.get(API_VERSION_ENV) or None


def entra_token(env: Mapping[str, str]) -> str:
    """A Microsoft Entra ID token: AZURE_OPENAI_AD_TOKEN, or azure-identity's default credential chain."""
    token = env.get(ENTRA_TOKEN_ENV)
    if token:
        return token
    try:
        identity = import_sdk("azure.identity", "Microsoft Entra ID sign-in (azure/ models without "
                              "AZURE_OPENAI_API_KEY)")  # lazy: evalkit[azure-entra]
    except SdkMissing:
        raise EvalkitError("AZURE_OPENAI_API_KEY is not set (needed for azure/ models; or sign in with "
                           f"Microsoft Entra ID: set {ENTRA_TOKEN_ENV}, or pip install 'evalkit[azure-entra]')"
                           ) from None
    try:
        return identity.DefaultAzureCredential().get_token(ENTRA_SCOPE).token
    except Exception as e:  # noqa: BLE001 - azure-identity raises its own ClientAuthenticationError family
        raise EvalkitError(f"azure/: no Microsoft Entra ID token ({type(e).__name__}); set AZURE_OPENAI_API_KEY "
                           f"or {ENTRA_TOKEN_ENV}, or sign in (az login)") from None


class AzureProvider(OpenAICompatProvider):
    """The chat client on one Azure route; its batches (batch_azure) take the same route and credential."""

    api_version: str | None = None
    entra_token: str | None = None


def azure_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                   max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> AzureProvider:
    """The client its record names: the key as `api-key`, or an Entra ID token as a bearer."""
    version = api_version_of(env)
    bases = [chat_base(u, spec.model, version) for u in spec.base_urls]
    headers: dict[str, str] = {}
    secrets: list[str] = []
    if not api_key:
        token = entra_token(env)
        headers["Authorization"] = f"Bearer {token}"
        secrets.append(token)
    provider = AzureProvider(spec, api_key=api_key, timeout_s=timeout_s, urls=[b for b, _ in bases],
                             route=bases[0][1], key_header="api-key", headers=headers, secrets=secrets,
                             max_tokens_field="max_completion_tokens",
                             send_temperature=not fixed_temperature(spec.model), env_proxy=True,
                             max_response_bytes=max_response_bytes,
                             responses_urls={b: f"{azure_endpoint(u)}/openai/v1/responses"
                                             for u, (b, _) in zip(spec.base_urls, bases, strict=True)})
    provider.api_version, provider.entra_token = version, secrets[0] if secrets else None
    return provider
