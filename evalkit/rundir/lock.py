"""One process per run directory: an OS file lock held from binding the directory to its last write.

Two processes writing one run directory ask every question twice and interleave their appends to
records.jsonl. `hold_run_dir` takes a non-blocking `fcntl.flock` on LOCK_FILE inside the
directory and writes the holder's pid and start time into it, so a second `evalkit run` or
`evalkit report` is refused at once with a message naming the holder.

The lock belongs to the open file, not to the file's existence: the OS releases it when the
holder closes it or dies (even by SIGKILL), so a lock file left behind by a killed process blocks
nobody; the next holder just overwrites its contents. The file itself is never removed (removing
it while another process waits to open it would let two processes hold "the" lock at once).

Where fcntl is unavailable (Windows), no lock is taken.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from evalkit.core.errors import EvalkitError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: runs are not protected from each other
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "run.lock"


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says (it may not have written it yet)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"evalkit process {int(info['pid'])} (started {info['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another evalkit process"


@contextlib.contextmanager
def hold_run_dir(path: Path, *, advice: str = "wait for it to finish or choose another --out") -> Iterator[None]:
    """Create `path` if needed and hold its lock for the block; EvalkitError at once if another
    process holds it."""
    if fcntl is None:
        yield
        return
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise EvalkitError(f"run directory {path}: cannot create its lock file ({e.strerror or e})") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise EvalkitError(f"run directory {path} is in use by {_holder(fd)}; {advice}") from e
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        with contextlib.suppress(OSError):  # the lock holds without the note; only the message suffers
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "started": started}).encode() + b"\n", 0)
        yield
    finally:
        os.close(fd)  # releases the lock
