"""`openrouter/<vendor>/<model>`: OpenRouter, OpenAI's chat format over the same aiohttp client as `openai/`.

What differs (openrouter.ai/docs, read 2026-11-26): the base URL `https://openrouter.ai/api/v1`; model
ids keep their vendor (`anthropic/claude-sonnet-4.5`); optional attribution headers (`HTTP-Referer`,
`X-Title`) that name the app on OpenRouter's pages; every reply's `usage.cost` in credits (1 credit =
1 USD), recorded as the answer's cost instead of an estimate; `provider` routing preferences in the
body (`--provider-routing`, part of the cache key since they change who answers); 402 once the credits
are spent, which stops the run (exit 2) until the user tops up and runs the same command again.
"""

from __future__ import annotations

from collections.abc import Mapping

from evalkit.providers.base import ProviderSpec
from evalkit.providers.openai.compat import OpenAICompatProvider
from evalkit.providers.registry import info
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES

APP_TITLE = "evalkit"  # X-Title: the app named on OpenRouter's pages (HTTP-Referer only when the user gives one)
# The user's own attribution, when they want their app named instead.
_ATTRIBUTION_ENV = {"OPENROUTER_APP_URL": "HTTP-Referer", "OPENROUTER_APP_TITLE": "X-Title"}


def attribution(env: Mapping[str, str]) -> dict[str, str]:
    """The attribution headers: evalkit's title, or the app the user names in OPENROUTER_APP_URL / _TITLE."""
    headers = {"X-Title": APP_TITLE}
    headers.update({header: env[var] for var, header in _ATTRIBUTION_ENV.items() if env.get(var)})
    return headers


def openrouter_provider(spec: ProviderSpec, *, api_key: str | None, env: Mapping[str, str], timeout_s: float = 120.0,
                        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> OpenAICompatProvider:
    """The client its record names: a bearer key, attribution headers, and the cost each reply reports."""
    return OpenAICompatProvider(spec, api_key=api_key, timeout_s=timeout_s,
                                urls=spec.base_urls or (info("openrouter").default_url or "",),
                                headers=attribution(env), reports_cost=True, env_proxy=True,
                                max_response_bytes=max_response_bytes)
