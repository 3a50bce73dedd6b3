"""JSON from a user's data files, parsed so that nesting too deep is an invalid-JSON error like any other.

`json.loads` raises RecursionError, not JSONDecodeError, on `[[[[…]]]]` nested a few thousand deep:
every loader that reported bad JSON as one line let that one through as a traceback. Here it is a
JSONDecodeError whose message is "nested too deeply", so each caller's usual message and lint's
usual finding apply.

JSON Lines are separated by "\n" alone (a "\r" before it belongs to the separator). `str.splitlines`
also splits at U+2028, U+2029, U+0085 and others, which JSON allows raw inside a string: a valid
line holding one was cut in two and rejected.
"""

from __future__ import annotations

import gc
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
    """json.loads, raising NestedTooDeeply (a JSONDecodeError) instead of RecursionError.

    The cycle collector is held off while parsing: a collection started deep inside the parser runs
    other objects' finalizers with no stack left, and their RecursionError is printed to stderr
    ("Exception ignored in sys.unraisablehook") around the one-line error. Parsing makes no cycles.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeeply from None
    finally:
        if collecting:
            gc.enable()


def at_column(exc: json.JSONDecodeError) -> str:
    """The error for a one-line message: its text and column ("nested too deeply" has no column)."""
    return exc.msg if isinstance(exc, NestedTooDeeply) else f"{exc.msg} at column {exc.colno}"


def jsonl_lines(text: str) -> list[str]:
    """The lines of JSON Lines text, numbered as an editor shows them (a final newline ends the last
    line, it does not start another); "\r\n" ends a line as "\n" does."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
