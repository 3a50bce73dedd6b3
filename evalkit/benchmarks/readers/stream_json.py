"""Reading JSON lists too big to hold in memory: records whose image strings add up to gigabytes of
base64. The file is read forward once, in chunks; each image stays in the file, kept as a span
(`ImageRef.from_span`: the file, the byte offsets of the base64 text), to be read when its query is
asked. Memory is one read chunk plus the text fields.

Every field but the image is parsed by json's own decoder (`raw_decode`) on a small window of the
file; the image string is skipped by looking for its closing quote, so it is never decoded or held.
TSVs read the same way: stream_tsv.py.

Files are opened by the path given: a link (the Hub cache's snapshot files) is never resolved. Where
an index is kept (saved_index.py), the read builds it, and the next read of the same file is the index's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.benchmarks.readers.saved_index import open_saved
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.types import ImageRef

CHUNK = 1 << 22  # bytes per read
BOM = b"\xef\xbb\xbf"
_WS = re.compile(rb"[ \t\r\n]*")
_DECODER = json.JSONDecoder()
_BACKSLASH, _QUOTE = 0x5C, 0x22


class _Bad(Exception):
    """A JSON syntax fault at a byte offset (turned into an EvalkitError naming file and record)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class JsonRecord:
    number: int  # 1-based position in the list
    offset: int  # byte offset of its "{"
    fields: dict[str, Any]  # every field but the image string
    image: ImageRef | None  # the image string's span (None: no image field, or not a string)


class _Window:
    """A binary file read forward: `buf` holds bytes base.. of the file, `pos` is the read position."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh, self.buf, self.base, self.pos, self.eof = fh, b"", 0, 0, False

    def offset(self) -> int:
        return self.base + self.pos

    def more(self) -> bool:
        """Drop the bytes before `pos` and read the next chunk; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.fh.read(CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk if self.pos < len(self.buf) else chunk
        self.base += self.pos
        self.pos = 0
        return True

    def peek(self) -> int | None:
        """The next byte after blanks (not consumed); None at the end of the file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return None

    def expect(self, chars: bytes) -> int:
        c = self.peek()
        if c is None or c not in chars:
            wanted = " or ".join(f"'{chr(x)}'" for x in chars)
            got = "the end of the file" if c is None else f"'{chr(c)}'"
            raise _Bad(f"expected {wanted}, found {got}", self.offset())
        self.pos += 1
        return c

    def value(self) -> Any:
        """The JSON value at `pos` (after `peek`), decoded by json on a window just big enough for it."""
        width = 1 << 12
        while True:
            end = min(len(self.buf), self.pos + width)
            text = self.buf[self.pos:end].decode("utf-8", "surrogateescape")  # a cut character: retried wider
            try:
                val, used = _DECODER.raw_decode(text)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(text) - 8
                cap = read_caps.caps().line_bytes
                if cut and end - self.pos < cap and self._wider(end):
                    width *= 4
                    continue
                at = self.offset() + len(text[:exc.pos].encode("utf-8", "surrogateescape"))
                raise _Bad(f"invalid JSON ({exc.msg})" if end - self.pos < cap else
                           f"a field {read_caps.over_line_cap()}", at) from None
            if used == len(text) and self._wider(end):  # a number may go on past the window
                width *= 4
                continue
            n = len(text[:used].encode("utf-8", "surrogateescape"))
            try:
                self.buf[self.pos:self.pos + n].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Bad("text that is not UTF-8", self.offset() + exc.start) from None
            self.pos += n
            return val

    def _wider(self, end: int) -> bool:
        """Whether bytes past `end` can be had (more of the buffer, or another chunk)."""
        return end < len(self.buf) or self.more()

    def tail(self, image: str) -> dict[str, Any] | None:
        """After a member's value: the rest of the object (", key: value, ... }") decoded in one go;
        None, with nothing consumed, when it does not decode so or holds `image` again (read it member
        by member then)."""
        head = "{" + json.dumps(_TAIL_KEY) + ":0"
        width = 1 << 9
        while True:
            end = min(len(self.buf), self.pos + width)
            text = self.buf[self.pos:end].decode("utf-8", "surrogateescape")
            try:
                val, used = _DECODER.raw_decode(head + text)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(head) + len(text) - 8
                if cut and end - self.pos < read_caps.caps().line_bytes and self._wider(end):
                    width *= 4
                    continue
                return None
            if image in val:
                return None
            n = len(text[:used - len(head)].encode("utf-8", "surrogateescape"))
            try:
                self.buf[self.pos:self.pos + n].decode("utf-8")
            except UnicodeDecodeError:
                return None
            self.pos += n
            val.pop(_TAIL_KEY, None)
            return val

    def skip_string(self) -> tuple[int, int]:
        """At a '"': move past the string without keeping it; (start, end) file offsets of its contents."""
        self.pos += 1
        start = self.offset()
        i = self.pos
        while True:
            buf = self.buf
            j = buf.find(b'"', i)
            if j < 0:  # keep only a trailing run of backslashes: it may escape a quote in the next chunk
                k = len(buf)
                while k > self.pos and buf[k - 1] == _BACKSLASH:
                    k -= 1
                self.pos = k
                if not self.more():
                    raise _Bad("a string is never closed", start - 1)
                i = 0
                continue
            b = j
            while b > 0 and buf[b - 1] == _BACKSLASH:
                b -= 1
            if (j - b) % 2:  # an escaped quote
                i = j + 1
                continue
            end = self.base + j
            self.pos = j + 1
            return start, end


def json_records(path: Path, image: str = "image") -> Iterator[JsonRecord]:
    """The records of the JSON list in `path`, the `image` string of each left in the file as a span.
    A syntax fault is an EvalkitError naming the file, the record and the byte offset (the rest of
    the file cannot be read past it)."""
    saved, builder = open_saved(path, "json", image)
    if saved is not None:  # the index made by an earlier read of this very file: the file is not read
        for number, at, _end, fields, span in saved["rows"]:
            yield JsonRecord(number, at, fields, None if span is None else ImageRef.from_span(str(path), *span))
        return
    number = 0
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; the generator may be left early
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except OSError as exc:
        raise EvalkitError(f"{path}: cannot read ({exc})") from exc
    with fh:
        w = _Window(builder.tee(fh) if builder is not None else fh)
        try:
            w.more()
            if w.buf.startswith(BOM):
                w.pos = len(BOM)
            w.expect(b"[")
            if w.peek() == ord("]"):
                w.pos += 1
            else:
                while True:
                    number += 1
                    rec = _record(w, number, path, image)
                    if builder is not None:  # the index keeps the record's end too: bytes offset..end
                        builder.add([rec.number, rec.offset, w.offset(), rec.fields,
                                     None if rec.image is None else list(rec.image.span()[1:])])
                    yield rec
                    if w.expect(b",]") == ord("]"):
                        break
            if w.peek() is not None:
                raise _Bad("more data after the list", w.offset())
            if builder is not None:
                builder.finish()
        except _Bad as exc:
            where = f"record {number}: " if number else ""
            raise EvalkitError(f"{path}: {where}{exc} at byte {exc.offset}") from None
        except OSError as exc:
            raise EvalkitError(f"{path}: cannot read ({exc})") from exc


def _record(w: _Window, number: int, path: Path, image: str) -> JsonRecord:
    """One record. Fast path: the members before the image key and those after the image string are
    each decoded in one go; anything unusual (the key not in the buffer, a nested "image" key, a
    fault) goes member by member, which names the fault exactly."""
    if w.peek() != ord("{"):
        raise _Bad("expected an object", w.offset())
    at = w.offset()
    m = _key_pattern(image).search(w.buf, w.pos, w.pos + _HEAD_SCAN)
    if m is not None:
        try:  # the members before the key, closed by a stand-in image: an object only at the top level
            head = _DECODER.decode(w.buf[w.pos:m.start()].decode("utf-8") + json.dumps(image) + ': ""}')
        except ValueError:
            head = None
        if isinstance(head, dict) and head.get(image) == "":
            del head[image]
            w.pos = m.end() - 1
            start, end = w.skip_string()
            span = ImageRef.from_span(str(path), start, end)
            tail = w.tail(image)
            if tail is not None:
                return JsonRecord(number, at, {**head, **tail}, span)
            return _members(w, number, at, path, image, head, span, after_value=True)
    w.pos += 1
    return _members(w, number, at, path, image, {}, None, after_value=False)


def _members(w: _Window, number: int, at: int, path: Path, image: str, fields: dict[str, Any],
             span: ImageRef | None, *, after_value: bool) -> JsonRecord:
    """The record's members one by one, from just after "{" or just after a member's value."""
    if after_value:
        if w.expect(b",}") == ord("}"):
            return JsonRecord(number, at, fields, span)
    elif w.peek() == ord("}"):
        w.pos += 1
        return JsonRecord(number, at, fields, None)
    while True:
        if w.peek() != _QUOTE:
            raise _Bad("expected a field name", w.offset())
        key = w.value()
        w.expect(b":")
        c = w.peek()
        if key == image and c == _QUOTE:
            start, end = w.skip_string()
            span = ImageRef.from_span(str(path), start, end)
            fields.pop(key, None)
        else:
            if c is None:
                raise _Bad("the file ends inside a record", w.offset())
            fields[key] = w.value()
            if key == image:
                span = None
        if w.expect(b",}") == ord("}"):
            return JsonRecord(number, at, fields, span)


_HEAD_SCAN = 1 << 16  # how far past "{" the fast path looks for the image key
_TAIL_KEY = "\0evalkit"  # the stand-in first member that makes a record's tail an object
_patterns: dict[str, re.Pattern[bytes]] = {}


def _key_pattern(image: str) -> re.Pattern[bytes]:
    """`"image"` followed by ':' and the opening quote of a string (the key, never a string's contents:
    a quote inside a string is escaped)."""
    if image not in _patterns:
        _patterns[image] = re.compile(re.escape(json.dumps(image).encode()) + rb"[ \t\r\n]*:[ \t\r\n]*\"")
    return _patterns[image]
