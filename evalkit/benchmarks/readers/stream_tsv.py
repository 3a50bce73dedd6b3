"""Reading TSVs too big to hold in memory: VLMEvalKit files whose base64 image cells add up to
gigabytes. The file is read forward once, in chunks; a long image cell stays in the file, kept as a
span (`ImageRef.from_span`: the file, the byte offsets of the base64 text), to be read when its query
is asked. Memory is one read chunk (one TSV record) plus the text fields.

`tsv_rows`: the rows under csv's excel-tab rules as `csv.DictReader` reads them (a quoted field may
hold tabs, newlines and doubled quotes; blank lines are skipped; missing cells are ""). JSON lists
read the same way: stream_json.py.

Files are opened by the path given: a link (the Hub cache's snapshot files) is never resolved. Where
an index is kept (saved_index.py), the read builds it, and the next read of the same file is the index's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from evalkit.benchmarks.readers.saved_index import Builder, open_saved
from evalkit.benchmarks.readers.stream_json import BOM, CHUNK
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.types import ImageRef

SHORT_IMAGE = 256  # TSV image cells up to this long are kept as text (another row's index, a list literal)
_TAB, _NL = 0x09, 0x0A


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
    nor a list literal is given as a span ref (without the blanks around it), not as text. Where an
    index is kept (saved_index.py), an indexed file gives its rows from the index, without reading it."""
    saved, builder = open_saved(path, "tsv", image)
    if saved is not None:
        return list(saved["header"]), _saved_rows(path, saved)
    try:
        fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed when the rows are done
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except OSError as exc:
        raise EvalkitError(f"{path}: cannot read TSV ({exc})") from exc
    lines = _Lines(builder.tee(fh) if builder is not None else fh, path)
    try:
        at, first = lines.next()
        while first and not first.strip(b"\r\n"):
            at, first = lines.next()
        if first.startswith(BOM):
            first = first[len(BOM):]
        fields, rec = _fields(path, lines, at, first) if first else ([], b"")
        header = [_text(path, lines.count, rec[s:e] if v is None else v).strip() for s, e, v in fields]
    except BaseException:
        fh.close()
        raise
    if builder is not None:
        builder.extra["header"] = header
    return header, _rows(path, fh, lines, header, image, builder)


def _saved_rows(path: Path, saved: dict) -> Iterator[TsvRow]:
    """The rows as an index keeps them: cells in the header's order, a span as [start, end]."""
    keys = list(dict.fromkeys(saved["header"]))
    for number, line, _at, _end, values, extra in saved["rows"]:
        cells: dict[str, str | ImageRef] = {
            k: ImageRef.from_span(str(path), *v) if isinstance(v, list) else v for k, v in zip(keys, values, strict=True)}
        yield TsvRow(number, line, cells, tuple(extra))


def _rows(path: Path, fh: BinaryIO, lines: _Lines, header: list[str], image: str,
          builder: Builder | None) -> Iterator[TsvRow]:
    col = header.index(image) if image in header else -1
    number = 0
    with fh:
        try:
            while True:
                at, rec = lines.next()
                if not rec:
                    if builder is not None:
                        builder.finish()
                    return
                if len(rec) <= 2 and not rec.strip(b"\r\n"):
                    continue  # a blank line (csv yields no row for it)
                fields, rec = _fields(path, lines, at, rec)
                number += 1
                cells: dict[str, str | ImageRef] = dict.fromkeys(header, "")
                for n, (s, e, v) in enumerate(fields[:len(header)]):
                    if n == col and v is None and e - s > SHORT_IMAGE:  # trimmed as clean_cell would
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
                if builder is not None:
                    builder.add([number, lines.count, at, at + len(rec),
                                 [list(v.span()[1:]) if isinstance(v, ImageRef) else v for v in cells.values()],
                                 list(extra)])
                yield TsvRow(number, lines.count, cells, extra)
        except OSError as exc:
            raise EvalkitError(f"{path}: cannot read TSV ({exc})") from exc
