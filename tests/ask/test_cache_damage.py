"""A damaged, unwritable or misplaced cache is a one-line error with the remedy (exit 2), not a
traceback that a re-run would hit again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.ask.store.cache import ResponseCache
from evalkit.cli import main


def _valid_db(cache_dir: Path) -> bytes:
    with ResponseCache(cache_dir) as cache:
        for i in range(200):
            cache.set(f"k{i}", {"text": "A" * 200})
    return (cache_dir / "cache.db").read_bytes()


def _damage(cache_dir: Path, how: str) -> Path:
    if how == "is-a-file":
        cache_dir.write_text("not a folder")
        return cache_dir
    good = _valid_db(cache_dir)
    db = cache_dir / "cache.db"
    for extra in cache_dir.glob("cache.db-*"):
        extra.unlink()
    if how == "garbage":
        db.write_bytes(os.urandom(8192))
    elif how == "truncated":
        db.write_bytes(good[: len(good) // 3])
    elif how == "header-only":
        db.write_bytes(good[:100] + b"\x00" * 4000)
    elif how == "db-is-a-folder":
        db.unlink()
        db.mkdir()
    return cache_dir


@pytest.mark.parametrize("how", ["garbage", "truncated", "header-only", "db-is-a-folder", "is-a-file"])
def test_damaged_cache_is_a_one_line_error(tmp_path, capsys, how):
    cache_dir = _damage(tmp_path / "cache", how)
    data = make_mcq_jsonl(tmp_path / "ds", 2)
    code = main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9", "--data", str(data),
                 "--out", str(tmp_path / "run"), "--cache-dir", str(cache_dir), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and "\n" not in err, err
    assert str(cache_dir) in err and ("--no-cache" in err or "folder" in err)


def test_unwritable_cache_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    import diskcache

    def refuse(*_a, **_k):  # what a read-only folder gives a non-root user (root writes through it)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(diskcache, "Cache", refuse)
    data = make_mcq_jsonl(tmp_path / "ds", 2)
    code = main(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9", "--data", str(data),
                 "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "is not writable (Permission denied)" in err and "\n" not in err
