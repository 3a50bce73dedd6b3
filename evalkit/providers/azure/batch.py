"""`azure/` batches: Azure OpenAI's global Batch API — OpenAI's Files + Batches shape on Azure's routes
(learn.microsoft.com/azure/ai-foundry/openai/how-to/batch, read 2026-11-26), through the openai SDK.

The same adapter as `openai/` batches (batch_openai), with three differences: the client (the SDK's
AsyncAzureOpenAI on the classic route, with `?api-version=`; on the v1 API a plain client at
`{endpoint}/openai/v1` whose only credential is the `api-key` header), the line URL Azure documents
(`/chat/completions`), and the body's `model`, which is the deployment (a global-batch deployment).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalkit.providers.base import azure_endpoint
from evalkit.providers.openai.batch import OpenAIBatches
from evalkit.providers.registry import batch_limits
from evalkit.providers.wire.sdk_http import EDIT_MAX_BYTES, guarded_sdk_client

if TYPE_CHECKING:
    from evalkit.providers.openai.compat import OpenAICompatProvider

AZURE_LINE_URL = "/chat/completions"


class AzureBatches(OpenAIBatches):
    provider = "azure"
    limits = batch_limits("azure")
    line_url = AZURE_LINE_URL

    def _make_client(self, live: OpenAICompatProvider, api_key: str, timeout_s: float) -> Any:
        openai = self._openai
        root = azure_endpoint(live.spec.base_urls[0])
        version = getattr(live, "api_version", None)
        token = getattr(live, "entra_token", None)
        http = guarded_sdk_client(openai, timeout_s, EDIT_MAX_BYTES)
        if version:  # the classic route: the SDK's Azure client (api-key header, ?api-version=)
            auth: dict[str, Any] = {"api_key": api_key} if api_key else {"azure_ad_token": token}
            return openai.AsyncAzureOpenAI(azure_endpoint=root, api_version=version, max_retries=2,
                                           timeout=timeout_s, http_client=http, **auth)
        # the v1 API: the token as the SDK's bearer, or the key moved from the bearer to `api-key` on the way out
        if api_key:
            http.event_hooks["request"].append(_as_api_key(api_key))
        return openai.AsyncOpenAI(api_key=api_key or token, base_url=f"{root}/openai/v1", max_retries=2,
                                  timeout=timeout_s, http_client=http)


def _as_api_key(key: str) -> Any:
    """An httpx request hook: the key travels as `api-key`, never as `Authorization: Bearer`."""

    async def hook(request: Any) -> None:
        request.headers.pop("Authorization", None)
        request.headers["api-key"] = key

    return hook
