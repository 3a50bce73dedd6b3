"""How evalkit talks through huggingface_hub: its logs kept off stderr, and every request bounded.

huggingface_hub asks the Hub's metadata with no timeout of its own (a call that is never answered
waits for ever), and resumes a file whose body stops arriving again and again (a body that sends a
few bytes and then nothing resets its count of attempts each time). evalkit gives each request
`EVALKIT_HUB_TIMEOUT` seconds (default 30) without a byte: the metadata call, the file's HEAD, and
each read of a file's body; the first timeout ends the download with one line (huggingface_hub
removes the part that arrived; the same command downloads the file again). A dropped connection is
still resumed by huggingface_hub as before: only silence ends a download.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping

from evalkit.core.errors import EvalkitError

TIMEOUT_VAR = "EVALKIT_HUB_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
# where huggingface_hub logs a retry from inside the `except` that caught the failure
_RETRY_LOGGERS = ("huggingface_hub.file_download", "huggingface_hub.utils._http")


class Silent(EvalkitError):
    """A Hub request had no byte for the timeout: not retried (one line says so)."""


def hub_timeout(env: Mapping[str, str]) -> float:
    """`EVALKIT_HUB_TIMEOUT` in seconds (a positive number), else the default; anything else is one line."""
    text = (env.get(TIMEOUT_VAR) or "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise EvalkitError(f"{TIMEOUT_VAR}={text!r}: expected a number of seconds above 0 (default "
                           f"{DEFAULT_TIMEOUT_S:g})")
    return value


def is_timeout(e: BaseException | None) -> bool:
    """A timeout of any HTTP stack huggingface_hub may use (httpx, httpx2, sockets), by its class's name."""
    return e is not None and any(c.__name__ in ("TimeoutException", "TimeoutError", "Timeout")
                                 for c in type(e).__mro__)


def is_transport_error(e: BaseException) -> bool:
    """An HTTP client's own failure (no answer, a broken connection), not the Hub's refusal."""
    return any(c.__name__ in ("RequestError", "TransportError") and c.__module__.startswith("httpx")
               for c in type(e).__mro__)


class _EndOnSilence(logging.Filter):
    """Drops huggingface_hub's retry warnings (evalkit's one line says what matters) and, where the
    failure being retried is a timeout, ends the download there: raised inside huggingface_hub's
    `except`, the exception leaves its retry loop."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and is_timeout(sys.exc_info()[1]):
            raise Silent("no answer")
        return False


@contextlib.contextmanager
def quiet_hub(timeout: float | None = None) -> Iterator[None]:
    """While evalkit calls huggingface_hub, its retry and warning logs stay off stderr; with `timeout`,
    a file's body read waits at most that long and a timed-out request is not retried. Its loggers and
    download timeout are as they were afterwards. Its telemetry (a request to huggingface.co to build
    its User-Agent, even when pointed at a mirror) is off unless the user turned it on: evalkit
    reaches only the source it was given."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # read when huggingface_hub is imported
    root = logging.getLogger("huggingface_hub")
    level = root.level
    root.setLevel(logging.ERROR)
    retries = [logging.getLogger(name) for name in _RETRY_LOGGERS]
    kept = [r.level for r in retries]
    ender = _EndOnSilence()
    constants = None
    if timeout is not None:
        for r in retries:
            r.setLevel(logging.WARNING)  # the retry warnings reach the filter (which drops them all)
            r.addFilter(ender)
        with contextlib.suppress(ImportError):
            from huggingface_hub import constants
        saved = getattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", None)
        if constants is not None:
            constants.HF_HUB_DOWNLOAD_TIMEOUT = timeout  # read by each body GET
    try:
        yield
    finally:
        root.setLevel(level)
        for r, was in zip(retries, kept, strict=True):
            r.removeFilter(ender)
            r.setLevel(was)
        if constants is not None:
            constants.HF_HUB_DOWNLOAD_TIMEOUT = saved
