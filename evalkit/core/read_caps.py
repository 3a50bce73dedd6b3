"""Byte caps on what one read of the user's data may hold: a data line, a JSON file read whole, an image.

Without them memory grew with the input: a 1 GB data file took 2 GB before "invalid JSON (line 1)",
a 1 GB image file 1 GB in lint. A read over its cap is refused before it is made, in one line naming
the cap and the flag that raises it (`--max-line-mb`, `--max-image-mb`). The defaults are far above
real data: a JSONL line or TSV row of 64 MB (an inline base64 image of ~48 MB fits), an image of
50 MB (every provider refuses far smaller ones).

The caps in force are a context variable: `evalkit run` and `evalkit lint` set them around loading
(`using`), so every loader reads them without an argument; the image pipeline takes its cap when it
is made (it reads on its own threads).
"""

from __future__ import annotations

import codecs
import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from evalkit.core.errors import EvalkitError

MB = 2**20
LINE_MB = 64.0
IMAGE_MB = 50.0
CHUNK = 1 << 22


@dataclass(frozen=True)
class ReadCaps:
    line_bytes: int = int(LINE_MB * MB)
    image_bytes: int = int(IMAGE_MB * MB)

    def key(self) -> dict[str, int]:
        """What a stored result computed under these caps depends on ({} at the defaults)."""
        return {} if self == DEFAULT else {"line_bytes": self.line_bytes, "image_bytes": self.image_bytes}


DEFAULT = ReadCaps()
_CAPS: ContextVar[ReadCaps] = ContextVar("evalkit_read_caps", default=DEFAULT)


def caps() -> ReadCaps:
    return _CAPS.get()


@contextlib.contextmanager
def using(line_mb: float | None = None, image_mb: float | None = None) -> Iterator[ReadCaps]:
    """The caps for the reads in this block (None: the default)."""
    new = ReadCaps(int((line_mb if line_mb is not None else LINE_MB) * MB),
                   int((image_mb if image_mb is not None else IMAGE_MB) * MB))
    token = _CAPS.set(new)
    try:
        yield new
    finally:
        _CAPS.reset(token)


def size_text(n: int) -> str:
    """A byte count for a message: "1,024 MB", "3.5 MB", "120 KB"."""
    if n < MB:
        return f"{n / 1024:,.0f} KB"
    return f"{n / MB:,.0f} MB" if n >= 10 * MB else f"{n / MB:,.1f} MB"


def over_line_cap() -> str:
    """How a message says a line is too long: "over the 64 MB cap on one data line (--max-line-mb raises it)"."""
    return f"over the {size_text(caps().line_bytes)} cap on one data line (--max-line-mb raises it)"


def over_image_cap(cap: int | None = None) -> str:
    """How a message says an image is too big: "over the 50 MB cap on one image (--max-image-mb raises it)"."""
    return f"over the {size_text(caps().image_bytes if cap is None else cap)} cap on one image (--max-image-mb raises it)"


def image_over(what: str, size: int, cap: int) -> str:
    """One line for an image over its cap, naming the flag."""
    return f"image {what} is {size_text(size)}, {over_image_cap(cap)}"


def read_whole(path: Path, encoding: str = "utf-8-sig") -> str:
    """A data file read at once (a JSON document), refused before reading when over the line cap.
    OSError and UnicodeDecodeError as `read_text` raises them; the cap is an EvalkitError."""
    cap = caps().line_bytes
    size = os.stat(path).st_size
    if size > cap:
        raise EvalkitError(f"{path}: the file is {size_text(size)}, {over_line_cap()}: a JSON file is read whole")
    return path.read_text(encoding=encoding)


def _byte_lines(fh: BinaryIO, cap: int) -> Iterator[tuple[int, bytes | None]]:
    """(number, bytes with their "\n") of each line of a binary file, read forward in chunks; a line
    over `cap` is read to its end without being kept, and given as None. The last line may have no "\n"."""
    pending: list[bytes] = []  # the start of a line that runs past the chunks read so far
    held, number, skipping = 0, 0, False
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            break
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            number += 1
            if skipping or held + end + 1 - start > cap + 1:  # (the cap counts the text, not its "\n")
                yield number, None
            else:
                yield number, b"".join([*pending, chunk[start:end + 1]])
            pending, held, skipping, start = [], 0, False, end + 1
        if not skipping and start < len(chunk):
            pending.append(chunk[start:])
            held += len(chunk) - start
            if held > cap:
                pending, held, skipping = [], 0, True
    if skipping or held:
        yield number + 1, None if skipping else b"".join(pending)


def text_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """(number, text) of each line of a JSON Lines file, read forward in chunks and never held whole:
    lines end at "\n" alone (a "\r" before it belongs to the end), a final newline starts no line, a
    BOM before the first is dropped. A line over the cap is skipped without being held and given as
    None. OSError as open() raises it; text that is not UTF-8 is an EvalkitError naming the line."""
    with open(path, "rb") as fh:
        for number, raw in _byte_lines(fh, caps().line_bytes):
            if raw is None:
                yield number, None
                continue
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            yield number, _text(path, number, raw.removesuffix(b"\n").removesuffix(b"\r"))


def csv_lines(path: Path, fh: BinaryIO) -> Iterator[str]:
    """The lines of an open TSV with their line ends, as csv reads them from a file opened with
    newline="" and encoding "utf-8-sig"; a line over the cap is an EvalkitError naming it (csv cannot
    go on past it: a quoted field may run over lines)."""
    for number, raw in _byte_lines(fh, caps().line_bytes):
        if raw is None:
            raise EvalkitError(f"{path}: line {number} is {over_line_cap()}")
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        yield _text(path, number, raw)


def data_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """`text_lines`, with a file that cannot be read as one EvalkitError naming it."""
    try:
        yield from text_lines(path)
    except OSError as exc:
        raise EvalkitError(f"{path}: cannot read ({exc})") from exc


def _text(path: Path, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalkitError(f"{path}: cannot read (line {number} is not UTF-8: {exc.reason})") from None
