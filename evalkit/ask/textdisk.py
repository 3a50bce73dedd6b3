"""The response cache's diskcache Disk: str keys and JSON-text values only, never pickle.

A module of its own so that importing evalkit.ask.cache (request keys, NullCache) does not
import diskcache; ResponseCache imports this when it opens a cache directory.
"""

from __future__ import annotations

from typing import Any

import diskcache
from diskcache.core import MODE_RAW, MODE_TEXT, UNKNOWN


class TextOnlyDisk(diskcache.Disk):
    """A diskcache Disk that refuses to pickle or unpickle: only str keys and values pass."""

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"cache keys must be str, got {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise TypeError("refusing to unpickle a cache key")
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> Any:
        if type(value) is not str or read:
            raise TypeError(f"cache values must be JSON text, got {type(value).__name__}")
        return super().store(value, read, key=key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        if mode not in (MODE_RAW, MODE_TEXT) or read:
            raise TypeError("refusing to read a non-text cache value (pickle is never used)")
        return super().fetch(mode, filename, value, read)
