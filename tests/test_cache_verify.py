"""`evalkit cache verify` finds every entry a run could not read (so would pay for again) and
`--repair` mends the cache without touching anything outside it or any readable answer."""

from __future__ import annotations

import os
import random
import sqlite3

from cli_under_test import run_cli

from evalkit.ask.cache import ResponseCache


def _fill(cache_dir, n=20):
    with ResponseCache(cache_dir) as cache:
        cache.set_many([(f"k{i}", {"text": f"answer {i}" + ("x" * (1 << 24) if i < 3 else "")}) for i in range(n)])


def _break(cache_dir, victim):
    db = sqlite3.connect(cache_dir / "cache.db")
    db.execute("UPDATE Cache SET value = 'not json {' WHERE key = 'k10'")
    db.execute("UPDATE Cache SET value = '[1, 2]' WHERE key = 'k11'")
    db.execute("UPDATE Cache SET filename = ? WHERE key = 'k0'", (os.path.relpath(victim, cache_dir),))
    (file1,) = db.execute("SELECT filename FROM Cache WHERE key = 'k1'").fetchone()
    db.commit()
    db.close()
    (cache_dir / file1).unlink()  # a value file gone
    stray = cache_dir / "ab" / "cd"
    stray.mkdir(parents=True)
    (stray / "0123.val").write_text('{"text": "orphan"}')


def test_verify_names_what_is_broken_and_repair_mends_only_that(tmp_path):
    cache_dir = tmp_path / "cache"
    _fill(cache_dir)
    victim = tmp_path / "victim.txt"
    victim.write_text('{"text": "not the cache\'s"}')
    (cache_dir / "file-hashes.json").write_text("{}")
    _break(cache_dir, victim)
    found = run_cli(["cache", "verify", "--cache-dir", str(cache_dir)])
    assert found.returncode == 1, found.stderr
    out = found.stdout
    assert "16 entries" in out and "1 entries pointing outside the cache folder" in out
    assert "2 entries whose value is not a JSON object" in out and "1 entries whose value file is missing" in out
    assert "2 value files without an entry" in out and "--repair" in out  # the stray one, and k0's own
    fixed = run_cli(["cache", "verify", "--repair", "--cache-dir", str(cache_dir)])
    assert fixed.returncode == 0 and "removed 6" in fixed.stdout, fixed.stdout + fixed.stderr
    again = run_cli(["cache", "verify", "--cache-dir", str(cache_dir)])
    assert again.returncode == 0 and "16 entries" in again.stdout and "all readable" in again.stdout
    assert victim.read_text() == '{"text": "not the cache\'s"}'  # nothing outside the cache touched
    assert (cache_dir / "file-hashes.json").exists()
    with ResponseCache(cache_dir) as cache:
        assert len(cache) == 16 and cache.get("k2")["text"].startswith("answer 2x") and cache.get("k19")
        assert cache.get("k10") is None and cache.get("k0") is None


def test_repair_moves_a_damaged_database_aside_keeping_what_it_can_read(tmp_path):
    cache_dir = tmp_path / "cache"
    _fill(cache_dir, n=400)
    db = cache_dir / "cache.db"
    data = bytearray(db.read_bytes())
    data[-2048:] = random.Random(57).randbytes(2048)  # the last page scrambled, the same bytes every run
    db.write_bytes(bytes(data))
    found = run_cli(["cache", "verify", "--cache-dir", str(cache_dir)])
    assert found.returncode == 1 and "database damaged" in found.stdout, found.stdout + found.stderr
    fixed = run_cli(["cache", "verify", "--repair", "--cache-dir", str(cache_dir)])
    assert fixed.returncode == 0 and "moved the damaged database to cache.db.damaged-" in fixed.stdout
    assert len([p for p in cache_dir.glob("cache.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]) == 1
    with ResponseCache(cache_dir) as cache:
        kept = len(cache)
        assert 300 <= kept < 400 and cache.get("k5") == {"text": "answer 5"}
    assert run_cli(["cache", "verify", "--cache-dir", str(cache_dir)]).returncode == 0
