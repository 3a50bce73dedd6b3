"""Files on disk: writing results so that a kill never leaves half a file under the real name, the files a
data set is read from, and the machine's own file failures (a full disk, a read-only folder, a file where a
folder belongs), which a re-run meets again until the user acts: one-line errors with the remedy and exit
status 2, not tracebacks that read like a bug (or exit 1, "incomplete, resumable")."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any) -> None:
    """Indented JSON via a temporary file and a rename (summary.json, config.json, comparison.json)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    """Text via a temporary file and a rename (report.md restated by a reused run)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def data_files(data: Path) -> list[Path]:
    """The files a data set is read from: the file itself, or every non-image, non-hidden file below a
    folder, sorted (what the run identity and lint fingerprint)."""
    if data.is_file():
        return [data]
    return sorted(p for p in data.rglob("*") if p.is_file() and p.suffix.lower() not in IMAGE_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(data).parts))


# ---- failures of the machine rather than of the run

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)
_MISPLACED = (errno.ENOTDIR, errno.EISDIR, errno.EEXIST)
_KEPT = "everything recorded so far is kept: re-run the same command to resume"


def _where(exc: OSError) -> str:
    return f"{exc.filename}: " if exc.filename else ""


def environment_error(exc: BaseException) -> str | None:
    """The one-line message for a failure of the machine, or None when `exc` is something else."""
    if isinstance(exc, OSError):
        if exc.errno in _FULL:
            return f"{_where(exc)}{exc.strerror} (disk full?); free some space, then {_KEPT}"
        if exc.errno in _READ_ONLY:
            return (f"{_where(exc)}{exc.strerror}: cannot write there; give --out / --cache-dir a writable "
                    f"folder or fix its permissions")
        if exc.errno in _MISPLACED:
            return f"{_where(exc)}{exc.strerror}: a file is where a folder belongs (or the reverse); check --out"
        return None
    if type(exc).__module__ == "sqlite3":  # the response cache; checked by name so sqlite3 is not imported
        text = str(exc)
        if "disk is full" in text or "disk I/O error" in text:
            return f"response cache: {text}; free some space (or use --no-cache), then {_KEPT}"
        if "readonly" in text or "read-only" in text:
            return f"response cache: {text}; give --cache-dir a writable folder or use --no-cache"
    return None
