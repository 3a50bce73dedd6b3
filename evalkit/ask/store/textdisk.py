"""The response cache's diskcache Disk: str keys and JSON-text values only, never pickle.

A module of its own so that importing evalkit.ask.store.cache (request keys, NullCache) does not
import diskcache; ResponseCache imports this when it opens a cache directory.
"""

from __future__ import annotations

import os
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
        if mode == MODE_TEXT and not self._inside(filename):
            raise OSError(f"refusing a cache value stored outside the cache directory: {filename!r}")
        return super().fetch(mode, filename, value, read)

    def remove(self, file_path: Any) -> None:
        if self._inside(file_path):  # a crafted row must not make `cache clear` delete anything else
            super().remove(file_path)

    def _inside(self, filename: Any) -> bool:
        """diskcache joins a stored file name to the cache directory unchecked: accept only relative
        names that stay inside it (no `..`, not absolute, no symlink leading out)."""
        if not isinstance(filename, str) or not filename or os.path.isabs(filename):
            return False
        root = os.path.realpath(self._directory)
        full = os.path.realpath(os.path.join(root, filename))
        return os.path.commonpath([root, full]) == root and full != root
