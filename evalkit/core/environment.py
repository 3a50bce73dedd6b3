"""Failures of the machine rather than of the run: a full disk, a read-only folder, a file where a
folder belongs. A re-run fails again until the user acts, so they are one-line errors with the remedy
and exit status 2, not tracebacks that read like a bug (or exit 1, "incomplete, resumable")."""

from __future__ import annotations

import errno

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
