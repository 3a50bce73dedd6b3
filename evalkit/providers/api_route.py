"""Which OpenAI API a request goes to (issue 47, items 1 and 2): the Responses API (`POST /v1/responses`) or
Chat Completions, read from the provider's record.

`--api responses|chat` chooses; without it, a model the record names as existing only on Responses
(`responses_only`, a pattern that takes the dated snapshots too) goes there, and every other model stays on
Chat Completions, where it was answered before (so its cache keys and run directories stand). The route is
part of what is sent: `GenParams.api` holds "responses" (in the request key), and nothing for chat.
"""

from __future__ import annotations

import re

from evalkit.core.errors import EvalkitError
from evalkit.providers.registry import RECORDS, info

RESPONSES = "responses"
CHAT = "chat"
ONLY_ON_RESPONSES = "only supported in v1/responses"  # what OpenAI's 400/404 says on chat/completions


def responses_only(provider: str, model: str) -> bool:
    """A model that exists only on the Responses API, by its record's pattern."""
    record = RECORDS.get(provider)
    return bool(record is not None and record.responses_only and re.match(record.responses_only, model))


def route_for(provider: str, model: str, asked: str | None, flag: str = "--model") -> str:
    """The route a run's requests take: `asked` (--api), else the model's default. `--api responses` for a
    provider that does not serve it is one line, before anything is written."""
    record = info(provider)
    if asked == RESPONSES and not record.responses:
        takers = ", ".join(f"{r.name}/" for r in RECORDS.values() if r.responses)
        raise EvalkitError(f"--api responses is for {takers} models, not {flag} {provider}/{model}")
    if asked is not None:
        return asked
    return RESPONSES if responses_only(provider, model) else CHAT


def api_setting(provider: str, model: str, asked: str | None) -> str | None:
    """What RunConfig.api holds once the model is known: "responses" for the Responses route, None for Chat
    Completions (the default everywhere it served before: `--api chat` is the same run and the same keys)."""
    return RESPONSES if route_for(provider, model, asked) == RESPONSES else None


def default_timeout(provider: str, model: str, route: str | None) -> float | None:
    """The longer request timeout the record gives a Responses-only model (None: the usual default)."""
    record = RECORDS.get(provider)
    if record is None or route != RESPONSES or not responses_only(provider, model):
        return None
    return record.responses_timeout


def route_hint(message: str) -> str:
    """A server's "only supported in v1/responses" error as one line naming the flag; any other unchanged."""
    if ONLY_ON_RESPONSES not in message:
        return message
    return f"{message} — this model is served only by the Responses API: run it with --api responses"
