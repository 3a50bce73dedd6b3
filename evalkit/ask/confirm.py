"""Confirm first: a model the server does not list is asked once before anything else is sent, and a run
whose first requests all fail alike stops before it sends the rest.

Most OpenAI-compatible servers list one alias and answer any model name (llama.cpp's server, TGI's
Messages API, Ollama's tag aliases, LiteLLM's wildcard routes); a strict one answers a name it does
not serve with 404, or 400, naming it. When the preflight found the model unlisted, it `require()`s a
confirmation: the runner then sends one request and holds every other until that one is answered.
An error naming the model stops the run (ModelNotServed, exit 2): nothing else is sent or recorded.
A reply, or an error about something else, confirms the model and lets every held request go; but a
permanent error about something else lets only the next request go, alone, while the errors are all
the same one. A confirming request that was never sent (the run stopped, or it was cancelled) hands
its turn to the next one.

The same watch runs on every live run until its first answer: when the first ALIKE requests to end all
failed with the same permanent error (LiteLLM without its database answers a wrong key with 400 "No
connected db." to every request alike), the run stops there (AllFailAlike, exit 2, one line naming the
error) instead of sending every query to the same refusal. A held run sends ALIKE requests; one that
was not held (its preflight found nothing to doubt) at most `--concurrency` + ALIKE - 1. Every request
that ended is recorded as it ended (the runner stops after recording the one that tripped the watch).
Once a request is answered the watch is over (one test per request).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from evalkit.core.errors import MESSAGE_CHARS, ProviderError, RunError, cause_of, server_reason

REFUSING_STATUSES = (400, 403, 404)  # vLLM and Ollama answer an unknown name with 404; LiteLLM with 400;
#                                   Bedrock a model the account may not use with 403
_NAME_EDGE = r"[\w.:/@-]"  # characters a model name may hold: a match must not continue into more of them
# after the name, a `.` or `:` that ends a sentence or a clause is punctuation, not more name: LiteLLM says
# "Invalid model name passed in model=no-such-model." (litellm 1.108.7), `llava:13b` is another model
_NAME_END = r"(?![\w/@-])(?![.:][\w.:/@-])"
ALIKE = 3  # the first requests to end, all failed with one permanent error: the run stops (AllFailAlike)
ANSWERED_KINDS = frozenset({"refused"})  # the model declined on content: it was reached, and answered


class ModelNotServed(RunError):
    """The server said it does not serve the model: the run's error (exit 2), not one query's."""


class AllFailAlike(RunError):
    """The run's first requests all failed with the same permanent error: the run's error (exit 2)."""


class TierRefused(RunError):
    """The first request of a run asking a service tier was refused as a bad request (Azure answers a
    deployment without flex with HTTP 400 and no fallback): the run's error (exit 2), one request sent."""


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
        self._refused: RunError | None = None  # ModelNotServed or AllFailAlike: the run stops
        self._changed = asyncio.Event()  # set (and replaced) whenever the confirming request ends
        self.waiting = 0  # requests held until the model is confirmed (for tests and the curious)
        self._answered = False  # a request was answered: the start is over, nothing left to watch
        self._streak: tuple[str, int] = ("", 0)  # the same permanent error, how many requests in a row
        self._confirmed_tries = 0  # confirming requests ended so far (each one failed, or it is over)
        self.stopped: AllFailAlike | None = None  # the first requests all failed alike: send nothing more
        self._tier: str | None = None  # --service-tier flex|priority: the first request confirms the tier too

    def require(self, listed: Sequence[str]) -> None:
        """The model is not among `listed` (the server's list): confirm it with the first request."""
        self._listed = tuple(listed)
        self._needed = True

    def require_tier(self, tier: str) -> None:
        """The run asks a service tier the model may not offer: the first request goes alone, and a bad-request
        answer to it stops the run (TierRefused) before anything more is sent."""
        self._tier = tier
        self._needed = True

    @property
    def pending(self) -> bool:
        """The model still waits to be confirmed."""
        return self._needed and self._refused is None

    @property
    def settled(self) -> bool:
        """Nothing left to watch: a request was answered (so the model is confirmed too)."""
        return self._answered


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

    def settle(self, error: ProviderError | None, confirming: bool = True) -> None:
        """A request ended (`error`: how it failed, None for a reply); `confirming`: it was the one turn()
        let go alone. Raises ModelNotServed when a confirming request's error is the server's "no such
        model" (nothing is recorded); when the first ALIKE requests all failed alike, `stopped` says so (the
        runner records this one, then stops); else a reply (or an error about something else, unless it
        repeats the permanent errors before it) confirms the model."""
        if confirming:
            self._confirming = False
            self._confirmed_tries += 1
        try:
            if self._refused is not None:  # stopped already: a request that was on the wire is recorded as it is
                return
            if confirming and error is not None and error.status in REFUSING_STATUSES \
                    and names_model(error.message, self.model):
                self._refused = self._not_served(error)
            elif confirming and self._tier is not None and error is not None and error.status == 400:
                self._refused = TierRefused(f"--service-tier {self._tier}: {self._who} refused the first request "
                                            f"({server_reason(error.message, MESSAGE_CHARS)}); the model or "
                                            "deployment may not offer that tier: leave the flag out or ask one "
                                            "that does")
            elif self._alike(error) >= ALIKE:
                self._refused = self.stopped = AllFailAlike(f"{self._who}: the first {self._streak[1]} requests all failed with the "
                                             "same error, so the run stopped there: "
                                             f"{server_reason(error.message if error else '', MESSAGE_CHARS)} "
                                             "(fix that, then run the same command again)")
            elif confirming and not (error is not None and error.kind == "permanent"
                                     and self._streak[1] == self._confirmed_tries):
                self._needed = False  # answered, or failed otherwise than every confirming request before it
        finally:
            if confirming:
                self._wake()
        if isinstance(self._refused, (ModelNotServed, TierRefused)):
            raise self._refused

    def _not_served(self, error: ProviderError) -> ModelNotServed:
        shown = ", ".join(self._listed[:5]) + (", …" if len(self._listed) > 5 else "")
        lists = f"; it lists: {shown}" if shown else ""  # nothing listed: no list was asked for (bedrock/)
        verdict = ("refuses these credentials for" if error.status == 403  # Bedrock's AccessDenied, a bad key
                   else "does not serve")
        # the adapter's message whole: it bounds the server's reason itself (core.errors.server_reason)
        return ModelNotServed(f"{self._who}: the server {verdict} model '{self.model}' "
                              f"({server_reason(error.message, MESSAGE_CHARS)}){lists}")

    def _alike(self, error: ProviderError | None) -> int:
        """How many requests in a row, before any answer, have now failed with this same permanent error
        (0: this one was answered, or failed otherwise)."""
        if self._answered:  # a request on the wire when the first answer came: the watch is over
            return 0
        if error is None or error.kind in ANSWERED_KINDS:
            self._answered = True
            self._streak = ("", 0)
        elif error.kind != "permanent":
            self._streak = ("", 0)  # the server is not refusing everything alike (a timeout, a 5xx after retries)
        else:
            cause = cause_of(error.kind, error.message)
            self._streak = (cause, self._streak[1] + 1 if self._streak[0] == cause else 1)
        return self._streak[1]

    def abandon(self) -> None:
        """The confirming request was not sent after all: the next request confirms the model."""
        self._confirming = False
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
