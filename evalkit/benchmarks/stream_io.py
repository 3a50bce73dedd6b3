"""Reading data files too big to hold in memory: JSON lists of records and TSVs whose image cells
add up to gigabytes of base64. Each file is read forward once, in chunks; the images stay in the
file, kept as spans (`ImageRef.from_span`: the file, the byte offsets of the base64 text), to be
read when their query is asked. Memory is one read chunk (one TSV record) plus the text fields.

`json_records`: the records of a JSON list. Every field but the image is parsed by json's own
decoder (`raw_decode`) on a small window of the file; the image string is skipped by looking for
its closing quote, so it is never decoded or held.

`tsv_rows`: the rows of a TSV under csv's excel-tab rules as `csv.DictReader` reads them (a quoted
field may hold tabs, newlines and doubled quotes; blank lines are skipped; missing cells are "").

Files are opened by the path given: a link (the Hub cache's snapshot files) is never resolved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.types import ImageRef

CHUNK = 1 << 22  # bytes per read
SHORT_IMAGE = 256  # TSV image cells up to this long are kept as text (another row's index, a list literal)
_BOM = b"\xef\xbb\xbf"
_WS = re.compile(rb"[ \t\r\n]*")
_DECODER = json.JSONDecoder()
_BACKSLASH, _QUOTE, _TAB, _NL = 0x5C, 0x22, 0x09, 0x0A


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
    number = 0
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; the generator may be left early
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except OSError as exc:
        raise EvalkitError(f"{path}: cannot read ({exc})") from exc
    with fh:
        w = _Window(fh)
        try:
            w.more()
            if w.buf.startswith(_BOM):
                w.pos = len(_BOM)
            w.expect(b"[")
            if w.peek() == ord("]"):
                w.pos += 1
            else:
                while True:
                    number += 1
                    yield _record(w, number, path, image)
                    if w.expect(b",]") == ord("]"):
                        break
            if w.peek() is not None:
                raise _Bad("more data after the list", w.offset())
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


# ---------------------------------------------------------------------------------------------- TSV


@dataclass(frozen=True)
class TsvRow:
    number: int  # 1-based data row (blank lines not counted)
    line: int  # the physical line it ends on
    cells: dict[str, str | ImageRef]  # column -> text; a long image cell as a span ref
    extra: tuple[str, ...] = ()  # cells beyond the header's columns (their first 100 characters)


class _Lines:
    """Physical lines of a binary file with the byte offset of each (read in big chunks and cut at
    newlines: BufferedReader.readline was twice as slow on lines of a few hundred KB). A line over the
    line cap (core.read_caps) is an error naming it, found before more of it is read."""

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh, self.path, self.offset, self.count = fh, path, 0, 0
        self.buf, self.pos, self.eof = b"", 0, False
        self.cap = read_caps.caps().line_bytes

    def next(self) -> tuple[int, bytes]:
        while True:
            j = self.buf.find(b"\n", self.pos)
            if (j if j >= 0 else len(self.buf)) - self.pos > self.cap:
                raise EvalkitError(f"{self.path}: line {self.count + 1} is {read_caps.over_line_cap()}")
            if j >= 0 or self.eof:
                end = j + 1 if j >= 0 else len(self.buf)
                line = self.buf[self.pos:end]
                self.pos = end
                break
            chunk = self.fh.read(CHUNK)
            self.buf = self.buf[self.pos:] + chunk
            self.pos, self.eof = 0, not chunk
        at = self.offset
        self.offset += len(line)
        self.count += bool(line)
        return at, line


def _field_end(rec: bytes, k: int) -> int:
    """Where the field from k ends: the next tab, else the line's end (before its \\r\\n)."""
    tab = rec.find(b"\t", k)
    if tab >= 0:
        return tab
    end = len(rec)
    if end > k and rec[end - 1] == _NL:
        end -= 1
        if end > k and rec[end - 1] == 0x0D:
            end -= 1
    return end


def _fields(path: Path, lines: _Lines, at: int, rec: bytes) -> tuple[list[tuple[int, int, bytes | None]], bytes]:
    """The fields of the record starting with line `rec` (at byte `at`): (start, end, value) with
    offsets into the record, value None when the field is unquoted (it is rec[start:end]); and the
    record's bytes (more lines when a quoted field runs over them)."""
    out: list[tuple[int, int, bytes | None]] = []
    i = 0
    while True:
        if rec.startswith(b'"', i):
            j = i + 1
            while True:
                q = rec.find(b'"', j)
                if q < 0:
                    _, more = lines.next()
                    if more:
                        rec += more
                        if len(rec) > lines.cap:  # a quoted field over many lines: the record's own cap
                            raise EvalkitError(f"{path}: the record from byte {at} is {read_caps.over_line_cap()}")
                        continue
                    q = len(rec)  # never closed: csv ends the field with the file (lint names the tabs it ate)
                    break
                if rec.startswith(b'"', q + 1):
                    j = q + 2
                    continue
                break
            t = _field_end(rec, q + 1) if q < len(rec) else q
            out.append((i, t, rec[i + 1:q].replace(b'""', b'"') + rec[q + 1:t]))  # csv keeps what follows
        else:
            t = _field_end(rec, i)
            out.append((i, t, None))
        if t < len(rec) and rec[t] == _TAB:
            i = t + 1
            continue
        return out, rec


def _text(path: Path, line: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalkitError(f"{path}: cannot read TSV (line {line} is not UTF-8: {exc.reason})") from None


def tsv_rows(path: Path, image: str = "image") -> tuple[list[str], Iterator[TsvRow]]:
    """(the header, the rows) of a TSV; an `image` cell longer than SHORT_IMAGE that is neither quoted
    nor a list literal is given as a span ref (without the blanks around it), not as text."""
    try:
        fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed when the rows are done
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except OSError as exc:
        raise EvalkitError(f"{path}: cannot read TSV ({exc})") from exc
    lines = _Lines(fh, path)
    try:
        at, first = lines.next()
        while first and not first.strip(b"\r\n"):
            at, first = lines.next()
        if first.startswith(_BOM):
            first = first[len(_BOM):]
        fields, rec = _fields(path, lines, at, first) if first else ([], b"")
        header = [_text(path, lines.count, rec[s:e] if v is None else v).strip() for s, e, v in fields]
    except BaseException:
        fh.close()
        raise
    return header, _rows(path, fh, lines, header, image)


def _rows(path: Path, fh: BinaryIO, lines: _Lines, header: list[str], image: str) -> Iterator[TsvRow]:
    col = header.index(image) if image in header else -1
    number = 0
    with fh:
        try:
            while True:
                at, rec = lines.next()
                if not rec:
                    return
                if len(rec) <= 2 and not rec.strip(b"\r\n"):
                    continue  # a blank line (csv yields no row for it)
                fields, rec = _fields(path, lines, at, rec)
                number += 1
                cells: dict[str, str | ImageRef] = dict.fromkeys(header, "")
                for n, (s, e, v) in enumerate(fields[:len(header)]):
                    if n == col and v is None and e - s > SHORT_IMAGE:  # trimmed as _cell would
                        while s < e and rec[s] in b" \r\n":
                            s += 1
                        while e > s and rec[e - 1] in b" \r\n":
                            e -= 1
                        if e - s > SHORT_IMAGE and rec[s] != ord("["):
                            cells[header[n]] = ImageRef.from_span(str(path), at + s, at + e)
                            continue
                    cells[header[n]] = _text(path, lines.count, rec[s:e] if v is None else v)
                extra = tuple((rec[s:min(e, s + 100)] if v is None else v[:100]).decode("utf-8", "replace")
                              for s, e, v in fields[len(header):])
                yield TsvRow(number, lines.count, cells, extra)
        except OSError as exc:
            raise EvalkitError(f"{path}: cannot read TSV ({exc})") from exc
