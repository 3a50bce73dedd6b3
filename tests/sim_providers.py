"""The providers the per-provider behaviour tests run, taken from the registry's records, and how a test
points one at the simulator (issue 43, item 3): a new record on a wire the simulator's plain routes
speak is covered by those tests without editing them (tests/providers/test_provider_unit.py shows it for a
fictitious record).

Everything here reads the record (its wire, key variables, base-URL variable); the tables are keyed by
the wire, never by a provider's name.
"""

from __future__ import annotations

from collections.abc import Callable

from evalkit.providers.registry import RECORDS, ProviderInfo

# The simulator's plain routes: its OpenAI (vLLM flavour), Anthropic and Gemini dialects, at the root.
PLAIN_WIRES = ("chat-completions", "messages", "gemini")
FINISH = {"chat-completions": "stop", "messages": "end_turn", "gemini": "STOP"}  # a plain stop, as each wire says it
REFUSAL_WORD = {"chat-completions": "content_filter", "messages": "refusal", "gemini": "SAFETY"}  # a refusal's reason
ANSWER_AT = {"chat-completions": "message.content", "messages": "content[0].text", "gemini": "parts[0].text"}


def on_plain_routes(record: ProviderInfo) -> bool:
    """The simulator's plain routes answer this provider as they are: its wire is one of theirs, and no
    account check stands in front (a router's key check and routes have their own tests, as do Azure's,
    Vertex AI's and Bedrock's)."""
    return record.wire in PLAIN_WIRES and record.key_check is None


class Providers(tuple):
    """The names of the records a rule takes, read from the registry now. A test parametrised with them runs
    for each; the rule is kept, so tests/providers/test_provider_unit.py can run the same test for a record that a
    fixture adds later, when the rule takes it."""

    rule: Callable[[ProviderInfo], bool]

    def __new__(cls, rule: Callable[[ProviderInfo], bool]) -> Providers:
        names = super().__new__(cls, (r.name for r in RECORDS.values() if rule(r)))
        names.rule = rule
        return names


def plain_providers() -> Providers:
    """Every provider the per-provider behaviour tests run."""
    return Providers(on_plain_routes)


def keyed_providers() -> Providers:
    """Those of them whose key is required."""
    return Providers(lambda r: on_plain_routes(r) and r.key_required)


def wire_of(provider: str) -> str:
    return RECORDS[provider].wire


def key_env(provider: str, key: str) -> dict[str, str]:
    """The environment holding `key` in the provider's first key variable (none for a keyless server)."""
    record = RECORDS[provider]
    return {record.key_env[0]: key} if record.key_required else {}


def base_url(provider: str, sim_url: str) -> str:
    """What a user passes as --base-url: a chat-completions URL with its /v1, the others the host."""
    return sim_url + "/v1" if wire_of(provider) == "chat-completions" else sim_url


def pointed_at(provider: str, url: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(CLI flags, environment) sending `provider` to the simulator at `url`, `env` holding its key: chat
    completions through --base-url, the others through the record's base-URL variable."""
    record = RECORDS[provider]
    if record.wire == "chat-completions":
        return ["--base-url", base_url(provider, url)], dict(env)
    return [], {**env, record.base_url_env: url}
