"""Checks a reply body must pass before it becomes a core `Response`, shared by every provider.

A server, proxy or SDK can hand back anything: bytes that are not UTF-8, text that is not JSON,
an array, an answer that is a number. Any of those is `malformed` (a transient ProviderError:
retried, and recorded as an error when the attempts run out), never an exception that escapes
the provider. Token counts are forgiving instead: a count that is not a non-negative integer
becomes 0, and the answer is kept, because it was paid for. So is a lone UTF-16 surrogate
(`"\\ud83d"`, valid JSON): it becomes U+FFFD (core.text.surrogates), the answer around it is kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalkit.core.errors import ProviderError
from evalkit.core.text.surrogates import repaired_if_escaped


def malformed(what: str) -> ProviderError:
    return ProviderError("transient", f"malformed reply: {what}")


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for messages ("a number", "a list")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


def json_object(body: bytes | str) -> dict[str, Any]:
    """The body as a JSON object; `malformed` when it is not UTF-8, not JSON, or not an object. Its strings
    can be written as UTF-8: a lone surrogate is U+FFFD."""
    if isinstance(body, bytes | bytearray):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise malformed("body is not UTF-8") from None
    try:
        value = json.loads(body)
    except ValueError:
        raise malformed("body is not JSON") from None
    if not isinstance(value, dict):
        raise malformed(f"body is {json_type(value)}, not an object")
    return repaired_if_escaped(body, value)


def member(obj: Any, key: str, where: str) -> Any:
    """obj[key] where obj must be an object."""
    if not isinstance(obj, dict):
        raise malformed(f"{where} is {json_type(obj)}, not an object")
    return obj.get(key)


def first_of(items: Any, where: str) -> Any:
    """items[0] of a non-empty list: a reply without one has no answer in it."""
    if not isinstance(items, list) or not items:
        raise malformed(f"no {where}" if items in (None, []) else f"{where} is {json_type(items)}, not a list")
    return items[0]


def text_of(value: Any, where: str) -> str:
    """An answer's text: a string, null (no text), or a list of only `{"type": "text", "text": str}`
    parts (joined). Anything else is malformed."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                       and isinstance(p.get("text"), str) for p in value):
        return "".join(p["text"] for p in value)
    kind = "a list with non-text parts" if isinstance(value, list) else json_type(value)
    raise malformed(f"{where} is {kind}, not text")


def string_of(value: Any, where: str) -> str:
    """A field that must be a string (a text block's text)."""
    if not isinstance(value, str):
        raise malformed(f"{where} is {json_type(value)}, not text")
    return value


def list_of(value: Any, where: str) -> list[Any]:
    """A field that must be a list (absent or null: the reply holds none)."""
    if not isinstance(value, list):
        raise malformed(f"no {where}" if value is None else f"{where} is {json_type(value)}, not a list")
    return value


def optional_text(value: Any) -> str | None:
    """A string field that is informative only (finish reason, reasoning): dropped when not a string."""
    return value if isinstance(value, str) else None


def token_count(usage: Any, key: str) -> int:
    """usage[key] when it is a non-negative integer, else 0 (also when usage is not an object)."""
    if not isinstance(usage, Mapping):
        return 0
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def snapshot(model: Any, fingerprint: Any = None) -> str | None:
    """Who answered, as the reply says: its model name and, where the API gives one, the backend's
    fingerprint (OpenAI `system_fingerprint`). Only short plain strings are kept."""
    parts = [str(x)[:120] for x in (model, fingerprint) if isinstance(x, str) and x.strip()]
    return " · ".join(parts) or None
