"""Text from a user's file made safe to echo on a terminal: control characters escaped, length capped.

A suite file's label (or any name evalkit repeats back) is printed in messages, tables and the live
display. Raw, an ESC sequence in it moves the cursor or clears the screen, and a 50 MB label is
printed in full, once per line that names it. Here every control, format or line/paragraph separator
character becomes its `\\uXXXX` spelling (as JSON writes it) and the text stops at `limit` characters
with "…". Only the part shown is looked at, so a huge value costs no more than a short one.
"""

from __future__ import annotations

import unicodedata

LABEL_CHARS = 80  # how much of a name a message or a table shows
_ESCAPED = ("Cc", "Cf", "Zl", "Zp", "Cs")  # controls, format (bidi overrides), separators, lone surrogates


def _escaped(ch: str) -> str:
    if unicodedata.category(ch) not in _ESCAPED:
        return ch
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown_text(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` as a message may show it: escaped (see the module docstring), at most `limit` characters."""
    out: list[str] = []
    size = 0
    for k, ch in enumerate(text):
        piece = _escaped(ch)
        more = k + 1 < len(text)
        if size + len(piece) + more > limit:  # no room for this piece (and, if more follows, the "…")
            return "".join(out) + "…"
        out.append(piece)
        size += len(piece)
    return "".join(out)


def shown_value(value: object, limit: int = LABEL_CHARS) -> str:
    """A value from a file, for a message saying it is wrong: a string or number as its repr (escaped,
    shortened), anything else by its type alone (a nested list's repr could be megabytes, or too deep)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return shown_text(repr(value) if not isinstance(value, str) else repr(value[: limit + 1]), limit)
    return f"a {type(value).__name__}"
