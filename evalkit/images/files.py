"""An image path that is not a plain file: say what it is, and never block opening it.

`Path.is_file()` is False alike for a missing file, a named pipe (FIFO), a device, a folder and a
symlink loop, and every one of them was reported "image file not found"; and `open()` on a named
pipe waits for a writer forever. `not_a_file` names what the path is; `open_regular` opens without
blocking and refuses anything but a regular file before reading a byte.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotRegularFile(OSError):
    """The path is there but is not a regular file (its str says what it is)."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def not_a_file(path: str | os.PathLike[str]) -> str | None:
    """None for a regular file (or a link to one); else what the path is, as a message's start:
    "image file not found", "image path is a symlink loop", "image is not a regular file (a named pipe)"."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "image file not found"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "image path is a symlink loop"
        return f"image cannot be read ({e.strerror or e})"
    if stat.S_ISREG(st.st_mode):
        return None
    return f"image is not a regular file ({_kind(st.st_mode)})"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """open(path, "rb") for a regular file; NotRegularFile for anything else, found without blocking
    (a named pipe is opened non-blocking, then refused). A symlink loop raises OSError(ELOOP)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"not a regular file ({_kind(mode)})")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_problem(e: OSError) -> str | None:
    """What a failed open of an image file was, in words, for the errors these two raise (else None)."""
    if isinstance(e, NotRegularFile):
        return str(e)
    if e.errno == errno.ELOOP:
        return "a symlink loop"
    return None
