"""`evalkit cache verify [--repair]`: check every entry of a response cache, and mend what is broken.

A run reads the cache tolerantly (an entry that does not parse is a miss), so damage costs money
quietly: answers paid for are asked again. Verify says what is wrong, entry by entry; --repair removes
the entries that cannot be read and the value files no entry refers to, and moves a database that
sqlite cannot read aside (cache.db.damaged-TIME), keeping every entry it could still read.

Checks: sqlite's integrity check; each row has a text key, a JSON-object value and, when the value
lives in a file, a file inside the cache folder that exists; value files (`??/??/*.val`) that no row
names. Files evalkit keeps beside the database (file-hashes.json) are not entries and are left alone.
And whether each readable entry would be served (ask/store/seal.py): swapped, altered, unsigned (written
before 0.4) and, with EVALKIT_CACHE_SECRET, wrongly signed entries are counted apart; --repair removes the
swapped and altered ones too (a run would ask them again), never an unsigned one (paid for).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.ask.store.seal import ALTERED, BADLY_SIGNED, SWAPPED, UNSIGNED, CacheSeal, audit, seal_counts

DB = "cache.db"


@dataclass
class CacheCheck:
    """What verify found (and, with repair, did)."""

    directory: Path
    entries: int = 0
    bad: Counter[str] = field(default_factory=Counter)  # reason -> entries
    orphans: int = 0  # value files no entry names
    damaged: str | None = None  # sqlite could not read the database: why
    removed: int = 0
    moved_to: Path | None = None
    salvaged: int = 0
    sealing: Counter[str] = field(default_factory=Counter)  # SWAPPED, ALTERED, UNSIGNED, BADLY_SIGNED -> entries
    seal: CacheSeal = field(default_factory=CacheSeal)

    @property
    def ok(self) -> bool:
        refused = self.sealing[SWAPPED] + self.sealing[ALTERED] + self.sealing[BADLY_SIGNED]
        unsigned = self.sealing[UNSIGNED] if self.seal.signed_only else 0
        return not self.bad and not self.orphans and self.damaged is None and not refused and not unsigned

    def summary(self) -> str:
        parts = [f"{self.directory}: {self.entries:,} entries"]
        if self.damaged:
            parts.append(f"database damaged ({self.damaged})")
        parts += [f"{n:,} {reason}" for reason, n in sorted(self.bad.items())]
        if self.damaged is None:
            parts.append(seal_counts(self.sealing, self.seal))
        if self.orphans:
            parts.append(f"{self.orphans:,} value files without an entry")
        if self.moved_to is not None:
            parts.append(f"moved the damaged database to {self.moved_to.name}, {self.salvaged:,} entries kept")
        if self.removed:
            parts.append(f"removed {self.removed:,}")
        return "; ".join(parts) + ("" if not self.ok or self.removed or self.moved_to else "; all readable")


def _reason(key: object, raw: int, mode: int, filename: object, value: object, root: Path) -> tuple[str | None, str]:
    """Why a row cannot be served (None when it can), and its text when it can."""
    if not isinstance(key, str) or raw != 1:
        return "entries with a foreign key", ""
    if mode == 1:  # diskcache MODE_RAW: the text is in the row
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    elif mode == 3:  # MODE_TEXT: the text is in a file of the cache folder
        if not isinstance(filename, str) or os.path.isabs(filename):
            return "entries pointing outside the cache folder", ""
        full = os.path.realpath(root / filename)
        if os.path.commonpath([str(root), full]) != str(root):
            return "entries pointing outside the cache folder", ""
        try:
            text = Path(full).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return "entries whose value file is missing or unreadable", ""
    else:
        return "entries not stored as text (pickle is never read)", ""
    try:
        parsed = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return "entries whose value is not a JSON object", ""
    return None, text


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        (status,), *more = con.execute("PRAGMA integrity_check").fetchall() or [("no answer",)]
        if status != "ok" or more:
            raise sqlite3.DatabaseError(status)
        return con.execute("SELECT rowid, key, raw, mode, filename, value FROM Cache").fetchall()


def _salvage(db: Path) -> list[tuple]:
    """Whatever rows a damaged database still yields, one at a time, from rowid to next rowid.

    Each step asks for the next rowid above the last one read, never counts rowids up one by one:
    a damaged page can claim a rowid in the billions, and counting up to it took for ever. A damaged
    tree can also answer "the next rowid above 300" with 78, round and round: that is where it ends.
    """
    out: list[tuple] = []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return out
    last = 0
    try:
        while True:
            try:
                found = con.execute("SELECT rowid FROM Cache WHERE rowid > ? ORDER BY rowid LIMIT 1",
                                    (last,)).fetchone()
                if found is None or found[0] <= last:  # the end, or a damaged tree going round in circles
                    break
                last = found[0]
                row = con.execute("SELECT rowid, key, raw, mode, filename, value FROM Cache WHERE rowid = ?",
                                  (last,)).fetchone()
            except sqlite3.Error:
                break
            if row is not None:
                out.append(row)
    finally:
        con.close()
    return out


def verify_cache(directory: Path, *, repair: bool = False, seal: CacheSeal | None = None) -> CacheCheck:
    """Check (and with `repair`, mend) the cache in `directory`."""
    root = Path(os.path.realpath(directory))
    check = CacheCheck(Path(directory), seal=seal or CacheSeal())
    db = root / DB
    if not db.is_file():
        return check
    try:
        rows = _rows(db)
    except sqlite3.DatabaseError as e:
        check.damaged = str(e)
        if repair:  # then the old value files: what they held is in the new database, or was unreadable
            _move_aside(check, db, root)
            check.removed = verify_cache(directory, repair=True, seal=seal).removed
        return check
    good: set[str] = set()
    broken: list[tuple[int, object]] = []
    rowids: dict[str, int] = {}

    def readable() -> Any:  # (key, value) of every entry that can be read; the others noted as broken
        for rowid, key, raw, mode, filename, value in rows:
            reason, text = _reason(key, raw, mode, filename, value, root)
            if reason is None:
                check.entries += 1
                if mode == 3:
                    good.add(os.path.realpath(root / filename))
                rowids[key] = rowid
                yield key, json.loads(text)
            else:
                check.bad[reason] += 1
                broken.append((rowid, key))

    verdicts = audit(readable(), check.seal)
    check.sealing.update(verdicts.values())
    broken += [(rowids[k], k) for k, why in verdicts.items() if why in (SWAPPED, ALTERED)]
    orphans = [p for p in root.glob("??/??/*.val") if os.path.realpath(p) not in good]
    check.orphans = len(orphans)
    if repair and (broken or orphans):
        _remove(check, root, broken, orphans)
    return check


def _remove(check: CacheCheck, root: Path, broken: list[tuple[int, object]], orphans: list[Path]) -> None:
    """Delete broken rows through diskcache (its counters follow), and unreferenced value files."""
    from evalkit.ask.store.cache import ResponseCache

    with ResponseCache(root) as cache:
        store = cache._cache
        with store.transact(retry=True):
            for rowid, _key in broken:  # by rowid, never by filename: a crafted name deletes nothing
                store._sql("DELETE FROM Cache WHERE rowid = ?", (rowid,))
        store.reset("count", store._sql("SELECT COUNT(key) FROM Cache").fetchone()[0])
        store.reset("size", store._sql("SELECT COALESCE(SUM(size), 0) FROM Cache").fetchone()[0])
    for path in orphans:
        path.unlink(missing_ok=True)
    check.removed = len(broken) + len(orphans)


def _move_aside(check: CacheCheck, db: Path, root: Path) -> None:
    """Keep the damaged database under another name, and start a new one with every entry still readable."""
    from evalkit.ask.store.cache import ResponseCache

    salvaged = {key: text for _, key, raw, mode, filename, value in _salvage(db)
                for reason, text in [_reason(key, raw, mode, filename, value, root)] if reason is None}
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = db.with_name(f"{DB}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(str(db) + suffix)
        if src.exists():
            src.rename(Path(str(target) + suffix))
    with ResponseCache(root) as cache:
        cache.set_texts(salvaged)  # as they were: an unsealed entry is not sealed by a repair
    check.moved_to, check.salvaged = target, len(salvaged)
