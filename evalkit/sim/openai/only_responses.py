"""The simulated OpenAI's models that exist only on the Responses API (the `*-pro` reasoning models and their
dated snapshots): asked on chat/completions, the server answers as OpenAI does, naming v1/responses.

The server's own rule (the simulator never reads the client's provider records)."""

from __future__ import annotations

import re

from evalkit.sim.machinery.wire import BadRequest

SERVER_RESPONSES_ONLY = re.compile(r"^(o1-pro|o3-pro|gpt-5-pro|gpt-5\.\d+-pro)(-\d{4}-\d{2}-\d{2})?$")
CHAT_REFUSAL = "This model is only supported in v1/responses and not in v1/chat/completions."


class OnlyOnResponses(BadRequest):
    """A chat/completions request for a model served only on v1/responses (OpenAI answers 404)."""

    status = 404


def refuse_on_chat(model: str) -> None:
    if SERVER_RESPONSES_ONLY.match(model):
        raise OnlyOnResponses(CHAT_REFUSAL)
