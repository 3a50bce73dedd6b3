"""`openai/<model>`: the OpenAI API's chat completions, over the same aiohttp client as vLLM.

The wire format is the one `openai_compat` already speaks (platform.openai.com/docs/api-reference/chat,
read 2026-11-23); only three things differ: the default URL, `max_completion_tokens`, and no
`temperature` for reasoning models, which accept only the default. The official SDK was the transport
until 0.2: importing it cost 1.2 s of every run and each request 1.3 ms of CPU against 0.33 ms for
aiohttp (bench/overhead.py), enough to make the client the bottleneck at 64 requests in flight. The SDK
still serves the Images API (`edit_openai`), and the tests run it against the simulator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from evalkit.providers.base import ProviderSpec
from evalkit.providers.openai.compat import OpenAICompatProvider
from evalkit.providers.registry import info
from evalkit.providers.wire.http_limits import DEFAULT_MAX_RESPONSE_BYTES

OPENAI_URL = info("openai").default_url or ""  # its record's
# Reasoning models accept only the default temperature.
_FIXED_TEMPERATURE = re.compile(r"^(o\d|gpt-5)")
# The SDK's optional account headers, read from the same variables it reads.
_ACCOUNT_HEADERS = {"OPENAI_ORG_ID": "OpenAI-Organization", "OPENAI_PROJECT_ID": "OpenAI-Project"}


def fixed_temperature(model: str) -> bool:
    """A reasoning model, which accepts only the default temperature (also Azure deployments named after one)."""
    return bool(_FIXED_TEMPERATURE.match(model))


def openai_provider(spec: ProviderSpec, *, api_key: str, env: Mapping[str, str], timeout_s: float = 120.0,
                    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> OpenAICompatProvider:
    headers = {header: env[var] for var, header in _ACCOUNT_HEADERS.items() if env.get(var)}
    return OpenAICompatProvider(spec, api_key=api_key, timeout_s=timeout_s, urls=spec.base_urls or (OPENAI_URL,),
                                max_tokens_field="max_completion_tokens",
                                send_temperature=not fixed_temperature(spec.model), headers=headers,
                                env_proxy=True,  # as the SDK did: HTTPS_PROXY applies to the hosted API
                                max_response_bytes=max_response_bytes)
