"""`openai-compatible/<service>/<model>`: any OpenAI-shaped service (Together, Fireworks, Groq, DeepInfra, a
LiteLLM proxy) from two environment variables, `<SERVICE>_BASE_URL` and `<SERVICE>_API_KEY`, with no code
per service (issue 43, item 4; inspect_ai's `openai-api/<service>/<model>`).

Model names with a slash are normal on self-hosted servers (`Qwen/Qwen2.5-VL-7B-Instruct`), so the form
applies only where 0.3 had no other reading: no --base-url, and `<SERVICE>_BASE_URL` set. The spec then
holds the model without the service and the service's URL, so its cache keys, run identity and run
directory are those of `openai-compatible/<model> --base-url <that URL>`; the service itself (which
variables hold the key, which reasoning field is sent) stays on the spec, out of every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import EvalkitError
from evalkit.providers.base import ProviderSpec
from evalkit.providers.wire.url_rules import has_userinfo, shown_without_query

if TYPE_CHECKING:
    from evalkit.core.types import GenParams


def service_prefix(service: str) -> str:
    """`deep-infra` -> `DEEP_INFRA`: the variables' prefix (upper case, `-` and `.` as `_`)."""
    return service.upper().replace("-", "_").replace(".", "_")


def service_spec(provider: str, model: str, env: Mapping[str, str], own_url_env: str) -> ProviderSpec | None:
    """The service form of PROVIDER/MODEL (MODEL = SERVICE/NAME, `<SERVICE>_BASE_URL` set), or None for
    0.3's reading. The provider's own variable (OPENAI_BASE_URL) names no service: under it,
    `openai-compatible/openai/gpt-4o` stays the model `openai/gpt-4o` (a LiteLLM proxy's name), as in 0.3."""
    service, sep, name = model.partition("/")
    if not (sep and service and name):
        return None
    url_env = f"{service_prefix(service)}_BASE_URL"
    value = env.get(url_env) or ""
    if url_env == own_url_env or not value.strip():
        return None
    if "?" in value or "#" in value:  # as url_rules.check_no_query refuses a --base-url, naming the variable
        raise EvalkitError(f"{url_env} ('{shown_without_query(value)}') has a query string or fragment, which "
                           f"evalkit would put in the middle of every request URL; give the service's URL "
                           f"without it (a key goes in {service_prefix(service)}_API_KEY)")
    return ProviderSpec(provider, name, tuple(value.replace(",", " ").split()), service=service)


def service_key(spec: ProviderSpec, env: Mapping[str, str], flag: str) -> str:
    """`<SERVICE>_API_KEY`, required (a service without a key answers 401 to every request): else one line
    naming the variable, before anything is written."""
    prefix = service_prefix(spec.service or "")
    var = f"{prefix}_API_KEY"
    key = env.get(var)
    typed = f"{spec.provider}/{spec.service}/{spec.model}"
    if not key:
        raise EvalkitError(f"{var} is not set (needed for {flag} {typed}, as {prefix}_BASE_URL is set)")
    if any(has_userinfo(u) for u in spec.base_urls):
        raise EvalkitError(f"{flag} {typed}: {prefix}_BASE_URL carries user:password@ (sent as Basic auth) and "
                           f"{var} is sent as a bearer token, but both go in the one Authorization header: "
                           f"give the URL without user:password@")
    return key


def service_hint(model: str) -> str:
    """What a SERVICE/NAME model could have meant when no base URL was found (appended to that one line)."""
    service, sep, name = model.partition("/")
    if not (sep and service and name):
        return ""
    prefix = service_prefix(service)
    return f"; or, for the service {service}, {prefix}_BASE_URL and {prefix}_API_KEY"


def service_reasoning(params: GenParams) -> dict[str, Any]:
    """The reasoning switch a service is sent: OpenAI's `reasoning_effort`, as given (these services follow
    OpenAI's API, not vLLM's chat-template switch)."""
    return {} if params.reasoning_effort is None else {"reasoning_effort": params.reasoning_effort}
