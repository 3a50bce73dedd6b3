"""Lone UTF-16 surrogates, replaced by U+FFFD wherever text from outside becomes ours.

JSON may spell a character as `\\ud83d\\ude00` (a surrogate pair, decoded to one character) and
also, validly, as half of one (`"A \\ud83d end"`). Python decodes the half to a lone surrogate, a
string that cannot be written as UTF-8: the cache, records.jsonl and the view would fail on it.
A reply that holds one was paid for and is otherwise sound, so its text is kept with each lone
surrogate replaced by U+FFFD, as a UTF-8 decoder does with bytes it cannot read (a pair that
reached us as two code points becomes the character it spells).
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
# a JSON escape of a surrogate (\uD800-\uDFFF, either case): the only way JSON text that is valid
# UTF-8 can hold one; a false hit (an escaped backslash before "ud83d") only costs a walk
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def repaired(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when it holds none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def may_hold_surrogates(source: str | bytes) -> bool:
    """Whether JSON text spells a surrogate: only then can its parsed value hold a lone one."""
    pattern = _ESCAPE_BYTES if isinstance(source, bytes | bytearray) else _ESCAPE
    return pattern.search(source) is not None  # type: ignore[arg-type]


def repaired_json(value: Any) -> Any:
    """A parsed JSON value with every string in it (keys too) repaired; dicts and lists are repaired in
    place. Iterative: a value nested as deeply as the parser allows is walked without recursing."""
    if isinstance(value, str):
        return repaired(value)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(repaired(k) is not k for k in node):
                items = [(repaired(k), v) for k, v in node.items()]
                node.clear()
                node.update(items)
            for k, v in node.items():
                if isinstance(v, str):
                    node[k] = repaired(v)
                elif isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, str):
                    node[i] = repaired(v)
                elif isinstance(v, dict | list):
                    stack.append(v)
    return value


def repaired_if_escaped(source: str | bytes, value: Any) -> Any:
    """`value`, parsed from the JSON text `source`, repaired only when the text spells a surrogate
    (the usual reply or line is not walked at all)."""
    return repaired_json(value) if may_hold_surrogates(source) else value
