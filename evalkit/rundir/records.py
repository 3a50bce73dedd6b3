"""records.jsonl's lines: how one is written (`record_line`), and reading them back tolerantly: one
damaged line costs that line, never the run directory.

A line can be damaged in many ways: torn by a kill (possibly inside a multi-byte character, and
then glued to the next append), an invalid byte, a hand edit that left `"variant": null` or a
string where numbers belong. Each line is decoded, parsed and validated on its own
(`Record.from_dict`); a line that fails is skipped and kept, byte for byte, in `damaged`, so the
caller can say which lines it skipped and save them (records.damaged.jsonl) before a rewrite drops
them. Their queries are then simply missing, and a re-run asks them again (from the cache when the
answer was stored). Only a records.jsonl that cannot be read at all (a directory, no permission)
is an error: one line naming it. A line that spells a lone UTF-16 surrogate (`"\\ud83d"`, valid
JSON, written before replies were repaired) is read with U+FFFD in its place, so it can be written
back as UTF-8.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.text.surrogates import repaired_if_escaped


def _line_encoder() -> Callable[[dict[str, Any]], str]:
    """json.dumps(..., ensure_ascii=False) as one C encoder made once: JSONEncoder.encode builds a new one
    for every call, a third of encoding a short record. The same text (a test compares them); a record
    holds no cycles, so none is looked for. Without the C encoder, JSONEncoder as before."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(ensure_ascii=False).encode
    plain = json.JSONEncoder(ensure_ascii=False)
    try:
        encode = make(None, plain.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    except TypeError:  # another Python's signature
        return plain.encode
    return lambda d: "".join(encode(d, 0))


_ENCODE_LINE = _line_encoder()


def record_line(record: Record) -> str:
    """One records.jsonl line (0.1.0's format: compact-ish json.dumps, UTF-8 kept, newline)."""
    return _ENCODE_LINE(record.to_dict()) + "\n"


DAMAGED = "records.damaged.jsonl"  # beside records.jsonl: damaged lines, saved before a rewrite drops them
SHOWN_LINES = 10  # line numbers named in a message


@dataclass(frozen=True)
class DamagedLine:
    number: int  # 1-based line number in records.jsonl
    raw: bytes  # as read, without its newline
    reason: str


@dataclass
class RecordsRead:
    """What one read of records.jsonl found."""

    records: dict[str, Record] = field(default_factory=dict)  # the last valid record per query id
    damaged: list[DamagedLine] = field(default_factory=list)
    lines: int = 0  # lines read, valid or not
    clean: bool = True  # every line valid, newline-terminated, none blank: appending to it is safe


def read_records(path: Path, each: Callable[[int, Record], None] | None = None) -> RecordsRead:
    """The records in `path` (none when it does not exist); damaged lines reported, never fatal. `each`
    sees every valid record with its line number, in file order (merge checks shards with it); what it
    raises stops the read."""
    out = RecordsRead()
    if not path.exists() and not path.is_symlink():
        return out
    try:
        with path.open("rb") as f:
            for raw in f:
                out.lines += 1
                _read_line(raw, out, each)
    except OSError as e:
        raise EvalkitError(f"{path}: cannot be read ({e.strerror or e}); move it aside or choose another "
                           "run directory") from e
    return out


def _read_line(raw: bytes, out: RecordsRead, each: Callable[[int, Record], None] | None = None) -> None:
    terminated = raw.endswith(b"\n")
    body = raw[:-1] if terminated else raw
    if not terminated:
        out.clean = False  # a torn last line: the next append must not be glued to it
    if not body.strip():
        out.clean = False
        return
    try:
        text = body.decode("utf-8")
        record = Record.from_dict(repaired_if_escaped(text, json.loads(text)))
    except UnicodeDecodeError as e:
        reason = f"not UTF-8 at byte {e.start}"
    except ValueError as e:  # JSON syntax, or a field of the wrong type
        reason = " ".join(str(e).split())[:120]
    except (TypeError, RecursionError) as e:
        reason = type(e).__name__
    else:
        if each is not None:
            each(out.lines, record)
        out.records[record.query_id] = record
        return
    out.clean = False
    out.damaged.append(DamagedLine(out.lines, body, reason))


def damaged_note(damaged: list[DamagedLine], *, saved: bool, then: str) -> str:
    """One line telling the user which lines were skipped and where they are kept."""
    n = len(damaged)
    numbers = ", ".join(str(d.number) for d in damaged[:SHOWN_LINES]) + (", …" if n > SHOWN_LINES else "")
    where = f", kept in {DAMAGED}" if saved else ""
    return (f"records.jsonl: {n} damaged line{'s' if n != 1 else ''} skipped "
            f"(line{'s' if n != 1 else ''} {numbers}){where}; {then}")


def save_damaged(folder: Path, damaged: list[DamagedLine]) -> None:
    """Append the damaged lines, verbatim, to records.damaged.jsonl in `folder`."""
    if not damaged:
        return
    with (folder / DAMAGED).open("ab") as f:
        f.write(b"".join(d.raw + b"\n" for d in damaged))
        f.flush()
