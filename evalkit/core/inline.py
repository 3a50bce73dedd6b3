"""The bytes of an inline image: raw bytes, base64 text, or a span of base64 text inside a data file.

One decoding for every reader (the image pipeline, lint), so a span and a b64 ref of the same
picture give the same bytes and hence the same cache identity (the sha256 of those bytes).
A span is read when its image is needed: open the data file by the path given (a link stays a
link), seek, read END - START bytes. JSON string escapes inside it (`\\/`, `\\n`) are undone; a
"data:...;base64," prefix is dropped, as for TSV cells.
"""

from __future__ import annotations

import base64
import json

from evalkit.core.types import ImageRef


def span_text(ref: ImageRef) -> bytes:
    """The base64 text of a span ref, escapes undone. OSError when the file cannot give those bytes
    (gone, or shorter than when it was read), ValueError for a bad escape."""
    path, start, end = ref.span()
    with open(path, "rb") as fh:
        fh.seek(start)
        raw = fh.read(end - start)
    if len(raw) != end - start:
        raise OSError(f"{path} ends before byte {end}: the file changed after it was read")
    if b"\\" in raw:  # a JSON writer may escape "/" as "\/" or wrap lines with "\n"
        raw = json.loads(b'"' + raw + b'"').encode("ascii")
    return raw


def b64_bytes(text: bytes | str) -> bytes:
    """Decoded base64 text (a "data:...;base64," prefix dropped). binascii.Error for bad base64."""
    if isinstance(text, str):
        if text.startswith("data:"):
            text = text.partition(",")[2]
    elif text.startswith(b"data:"):
        text = text.partition(b",")[2]
    return base64.b64decode(text)  # a str with non-ASCII characters: ValueError


def inline_bytes(ref: ImageRef) -> bytes:
    """The stored (encoded) bytes of a "bytes", "b64" or "span" ref. binascii.Error / ValueError for
    bad base64, OSError when a span's file cannot be read."""
    if ref.kind == "bytes":
        return ref.value if isinstance(ref.value, bytes) else str(ref.value).encode("latin-1")
    if ref.kind == "b64":
        return b64_bytes(ref.value)
    if ref.kind == "span":
        return b64_bytes(span_text(ref))
    raise ValueError(f"not an inline image: {ref.describe()}")


def inline_size(ref: ImageRef) -> int:
    """The stored byte size of an inline image without reading or decoding it (base64: 3/4 of the text)."""
    if ref.kind == "bytes":
        return len(ref.value)
    if ref.kind == "span":
        _, start, end = ref.span()
        return (end - start) * 3 // 4
    text = str(ref.value)
    return len(text.partition(",")[2] if text.startswith("data:") else text) * 3 // 4
