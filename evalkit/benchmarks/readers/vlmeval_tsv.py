"""The rows of a VLMEvalKit TSV, as csv reads them or streamed (long base64 image cells left in the
file), with the checks every reader of these files needs: a field limit that admits base64 images,
an unbalanced quote that swallows rows, cells beyond the header's columns, and pandas' spellings of
an empty cell. Shared by the multiple-choice reader (mcq_io) and TDBench's (tdbench_io).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.benchmarks.lenient import Sink
from evalkit.benchmarks.readers.stream_tsv import tsv_rows
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError

_MISSING = {"", "nan", "NaN", "None"}  # how pandas-written TSVs spell an empty cell


def clean_cell(value: Any) -> str:
    """A TSV cell as clean text, with pandas' spellings of "missing" made empty."""
    text = "" if value is None else str(value).strip()
    return "" if text in _MISSING else text


def spelled_missing(value: Any) -> bool:
    """A cell that holds text ("None", "nan", "NaN") which `clean_cell`, as pandas does, reads as missing:
    VLMEvalKit's pipeline then leaves such an option out of its prompt (TDBench official mode says so)."""
    text = "" if value is None or not isinstance(value, str) else value.strip()
    return text != "" and text in _MISSING


def _raise_field_limit() -> None:
    """Base64 image cells are far over csv's default 128 KiB field limit: the line cap is the limit
    (core.read_caps; a quoted field may run over lines)."""
    limit = min(sys.maxsize, read_caps.caps().line_bytes)
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 2


def _csv_error(path: Path, exc: csv.Error) -> EvalkitError:
    """csv's own error as one line; a field over the limit names the cap and its flag."""
    if "field larger than field limit" in str(exc):
        return EvalkitError(f"{path}: a field is {read_caps.over_line_cap()}")
    return EvalkitError(f"{path}: cannot read TSV ({exc})")


def check_row_span(path: Path, k: int, last_line: int, row: Mapping[Any, Any]) -> None:
    """A field that starts with a double quote runs to the next quote, across tabs and lines: one
    stray quote silently swallows the rows that follow. A tab inside a field can only come from that
    (a TSV field cannot hold a tab otherwise)."""
    if any(isinstance(v, str) and "\t" in v for key, v in row.items() if key is not None):
        raise EvalkitError(f"{path}: row {k} (ending on line {last_line}): a field runs over tabs or lines, so "
                           "an unbalanced double quote (\") swallowed what follows; close or remove the quote")


def check_extra_cells(path: Path, k: int, last_line: int, n_columns: int, extra: list[str]) -> None:
    """A row with more cells than the header has columns: csv files the rest under no column, and the
    cells were silently lost. Empty ones (a trailing tab) lose nothing and pass."""
    filled = [c for c in extra if c.strip()]
    if filled:
        shown = ", ".join(repr(c.strip()[:40] + ("…" if len(c.strip()) > 40 else "")) for c in filled[:3])
        raise EvalkitError(f"{path}: row {k} (ending on line {last_line}): {n_columns + len(extra)} cells for the "
                           f"header's {n_columns} columns ({shown} beyond the last); a tab inside a cell, or a column "
                           "with no name in the header")


@contextmanager
def dict_reader(path: Path) -> Iterator[csv.DictReader[str]]:
    """csv's reader over the TSV, line by line (each under the cap), its header's names stripped; a
    failure to read it, csv's own error included, is one line naming the file."""
    _raise_field_limit()
    try:
        with open(path, "rb") as fh:
            reader = csv.DictReader(read_caps.csv_lines(path, fh), delimiter="\t", restval="")
            reader.fieldnames = [h.strip() for h in (reader.fieldnames or [])]
            yield reader
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except csv.Error as exc:
        raise _csv_error(path, exc) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalkitError(f"{path}: cannot read TSV ({exc})") from exc


def csv_rows(path: Path, sink: Sink) -> tuple[list[str], dict[int, Mapping[Any, Any]]]:
    """The header and the rows by data row number (1-based); a bad row is the sink's (see check_row_span,
    check_extra_cells)."""
    rows: dict[int, Mapping[Any, Any]] = {}
    with dict_reader(path) as reader:
        header = list(reader.fieldnames or [])
        for count, row in enumerate(reader, start=1):
            with sink.guard(path, row=f"row {count}"):
                check_row_span(path, count, reader.line_num, row)
                check_extra_cells(path, count, reader.line_num, len(header), row.pop(None, None) or [])
                rows[count] = row
    return header, rows


def streamed_rows(path: Path, sink: Sink) -> tuple[list[str], dict[int, Mapping[Any, Any]]]:
    """The rows as `csv_rows` reads them, long image cells as spans of the file (stream_tsv)."""
    header, found = tsv_rows(path)
    rows: dict[int, Mapping[Any, Any]] = {}
    for row in found:
        with sink.guard(path, row=f"row {row.number}"):
            check_row_span(path, row.number, row.line, row.cells)
            check_extra_cells(path, row.number, row.line, len(header), list(row.extra))
            rows[row.number] = row.cells
    return header, rows
