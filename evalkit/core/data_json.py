"""JSON from a user's data files, parsed so that nesting too deep is an invalid-JSON error like any other.

`json.loads` raises RecursionError, not JSONDecodeError, on `[[[[…]]]]` nested a few thousand deep:
every loader that reported bad JSON as one line let that one through as a traceback. Here it is a
JSONDecodeError whose message is "nested too deeply", so each caller's usual message and lint's
usual finding apply.
"""

from __future__ import annotations

import json
from typing import Any

TOO_DEEP = "nested too deeply"


class NestedTooDeeply(json.JSONDecodeError):
    """The text nests arrays or objects deeper than the parser can follow (no useful position)."""

    def __init__(self) -> None:
        super().__init__(TOO_DEEP, "", 0)

    def __str__(self) -> str:
        return TOO_DEEP


def loads(text: str | bytes) -> Any:
    """json.loads, raising NestedTooDeeply (a JSONDecodeError) instead of RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeeply from None


def at_column(exc: json.JSONDecodeError) -> str:
    """The error for a one-line message: its text and column ("nested too deeply" has no column)."""
    return exc.msg if isinstance(exc, NestedTooDeeply) else f"{exc.msg} at column {exc.colno}"
