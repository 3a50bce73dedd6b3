"""A crafted cache.db cannot make evalkit read or delete files outside the cache directory."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from evalkit.ask.store.cache import ResponseCache
from evalkit.cli import main

MODE_TEXT = 3  # diskcache's mode for a value kept in a file of its own


def _craft(cache_dir: Path, key: str, filename: str) -> None:
    """Point the row of `key` at `filename`, as a hostile cache.db would."""
    with sqlite3.connect(cache_dir / "cache.db") as db:
        db.execute("UPDATE Cache SET mode = ?, filename = ?, value = NULL WHERE key = ?", (MODE_TEXT, filename, key))


@pytest.mark.parametrize("where", ["../victim/secret.json", "{abs}", "ok/../../victim/secret.json", "link/secret.json"])
def test_values_outside_the_cache_are_neither_read_nor_deleted(tmp_path: Path, where: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    secret = victim / "secret.json"
    secret.write_text('{"text": "served from outside", "usage": {}}')
    cache_dir = tmp_path / "cache"
    with ResponseCache(cache_dir) as cache:
        cache.set("k1", {"text": "A"})
        cache.set("k2", {"text": "B"})
    os.symlink(victim, cache_dir / "link")  # a symlink inside the cache leading out of it
    _craft(cache_dir, "k1", str(secret) if where == "{abs}" else where)

    with ResponseCache(cache_dir) as cache:
        assert cache.get("k1") is None  # a miss: asked again, never served from the victim's file
        assert cache.get_many(["k1", "k2"]) == {"k2": {"text": "B"}}
    assert main(["cache", "clear", "--cache-dir", str(cache_dir)]) == 0
    assert secret.read_text().startswith('{"text": "served from outside"')  # still there
    with ResponseCache(cache_dir) as cache:
        assert len(cache) == 0
