"""Confirm first: a model the server does not list is asked once before anything else is sent.

Most OpenAI-compatible servers list one alias and answer any model name (llama.cpp's server, TGI's
Messages API, Ollama's tag aliases, LiteLLM's wildcard routes); a strict one answers a name it does
not serve with 404, or 400, naming it. When the preflight found the model unlisted, it `require()`s a
confirmation: the runner then sends one request and holds every other until that one is answered.
An error naming the model stops the run (ModelNotServed, exit 2): nothing else is sent or recorded.
Any other answer (a reply, or an error about something else) confirms the model and lets every held
request go. A confirming request that was never sent (the run stopped, or it was cancelled) hands
its turn to the next one.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from evalkit.core.errors import MESSAGE_CHARS, ProviderError, RunError, server_reason

REFUSING_STATUSES = (400, 403, 404)  # vLLM and Ollama answer an unknown name with 404; LiteLLM with 400;
#                                   Bedrock a model the account may not use with 403
_NAME_EDGE = r"[\w.:/@-]"  # characters a model name may hold: a match must not continue into more of them
# after the name, a `.` or `:` that ends a sentence or a clause is punctuation, not more name: LiteLLM says
# "Invalid model name passed in model=no-such-model." (litellm 1.108.7), `llava:13b` is another model
_NAME_END = r"(?![\w/@-])(?![.:][\w.:/@-])"


class ModelNotServed(RunError):
    """The server said it does not serve the model: the run's error (exit 2), not one query's."""


def names_model(message: str | None, model: str) -> bool:
    """The error message names `model` as a whole name (`llava` in 'model "llava" not found' and in
    'model=llava.', not in 'llava:13b'), ignoring case."""
    if not message or not model:
        return False
    return re.search(rf"(?<!{_NAME_EDGE}){re.escape(model)}{_NAME_END}", message, re.IGNORECASE) is not None


class Confirmation:
    """One model's confirmation, shared by every request the runner sends for it."""

    def __init__(self, model: str, flag: str = "--model", label: str | None = None) -> None:
        self.model = model
        self._who = f"{flag} {label or model}"
        self._listed: tuple[str, ...] = ()
        self._needed = False
        self._confirming = False  # a request is out confirming the model
        self._refused: ModelNotServed | None = None
        self._changed = asyncio.Event()  # set (and replaced) whenever the confirming request ends
        self.waiting = 0  # requests held until the model is confirmed (for tests and the curious)

    def require(self, listed: Sequence[str]) -> None:
        """The model is not among `listed` (the server's list): confirm it with the first request."""
        self._listed = tuple(listed)
        self._needed = True

    @property
    def pending(self) -> bool:
        """The model still waits to be confirmed."""
        return self._needed and self._refused is None

    async def turn(self) -> bool:
        """Return when a request may be sent. True: it is the confirming request, and its end must be told
        (settle() with its error or None, or abandon() when it was not sent after all). Raises
        ModelNotServed once the server has said it does not serve the model."""
        while True:
            if self._refused is not None:
                raise self._refused
            if not self._needed:
                return False
            if not self._confirming:
                self._confirming = True
                return True
            changed = self._changed
            self.waiting += 1
            try:
                await changed.wait()
            finally:
                self.waiting -= 1

    def settle(self, error: ProviderError | None) -> None:
        """The confirming request was answered (`error`: how it failed, None for a reply). Raises
        ModelNotServed when the error is the server's "no such model"; else the model is confirmed."""
        self._confirming = False
        if error is not None and error.status in REFUSING_STATUSES and names_model(error.message, self.model):
            shown = ", ".join(self._listed[:5]) + (", …" if len(self._listed) > 5 else "")
            lists = f"; it lists: {shown}" if shown else ""  # nothing listed: no list was asked for (bedrock/)
            verdict = ("refuses these credentials for" if error.status == 403  # Bedrock's AccessDenied, a bad key
                       else "does not serve")
            # the adapter's message whole: it bounds the server's reason itself (core.errors.server_reason)
            self._refused = ModelNotServed(f"{self._who}: the server {verdict} model '{self.model}' "
                                           f"({server_reason(error.message, MESSAGE_CHARS)}){lists}")
        else:
            self._needed = False
        self._wake()
        if self._refused is not None:
            raise self._refused

    def abandon(self) -> None:
        """The confirming request was not sent after all: the next request confirms the model."""
        self._confirming = False
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
