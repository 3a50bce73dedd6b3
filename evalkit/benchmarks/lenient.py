"""Strict and lenient loading through one code path.

A run loads strictly: the first bad row is an EvalkitError naming file and row, so a benchmark
never quietly loses questions. `evalkit lint` must instead see every fault of a release at once.
Both go through the same reader code, which reports faults to a `Sink`:

* `sink.guard(...)` wraps the reading of one row (or file): strict, an error passes through
  unchanged; lenient, it becomes a `LoadProblem` and reading goes on with the next row.
* `sink.content(message)` is a fault of the item's content that a lint check names on the item
  itself (gold not among the options, an empty question, an image file that is not there):
  strict, it raises as before; lenient, the item is kept as read, so it still takes part in the
  duplicate and balance checks.

`STRICT` is the sink the run's loaders use by default: their behaviour is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Item

# what a lenient row guard also turns into a problem: malformed values that reach Python itself
_LENIENT_CATCHES = (EvalkitError, ValueError, TypeError, KeyError, AttributeError, IndexError, OSError)


@dataclass(frozen=True)
class LoadProblem:
    """One row (or file) a lenient load could not read; a strict load stops at the first."""

    message: str  # one line, without the file name
    file: str | None = None
    row: str | None = None  # "row 5", "line 3", "record 2", "block 4, question 1": as the format counts
    items: tuple[str, ...] = ()  # the item id(s), where known
    where: str | None = None  # scene / block where the format has them
    kind: str = "unreadable-row"


@dataclass
class LenientLoad:
    """What a lenient load read: the items it could build, and every problem on the way."""

    items: list[Item]
    problems: list[LoadProblem] = field(default_factory=list)


class Sink:
    """Where reader code reports a fault (see the module docstring). Strict unless `lenient`."""

    def __init__(self, lenient: bool = False) -> None:
        self.lenient = lenient
        self.problems: list[LoadProblem] = []

    def content(self, message: str) -> None:
        """A content fault a lint check reports on the kept item: strict raises, lenient goes on."""
        if not self.lenient:
            raise EvalkitError(message)

    def add(self, message: str, file: object = None, *, row: str | None = None, items: Sequence[str] = (),
            where: str | None = None, kind: str = "unreadable-row") -> None:
        """A fault that drops the row: strict raises `message`, lenient records it."""
        if not self.lenient:
            raise EvalkitError(message)
        self.problems.append(LoadProblem(_short(message, file, row), None if file is None else str(file), row,
                                         tuple(items), where, kind))

    def guard(self, file: object = None, *, row: str | None = None, items: Sequence[str] = (),
              where: str | None = None, kind: str = "unreadable-row") -> _Guard:
        """A `with` block reading one row (or file): lenient, an error in it is recorded and skipped."""
        return _Guard(self, file, row, tuple(items), where, kind)


class _Guard:
    def __init__(self, sink: Sink, file: object, row: str | None, items: tuple[str, ...], where: str | None,
                 kind: str) -> None:
        self.sink, self.file, self.row, self.items, self.where, self.kind = sink, file, row, items, where, kind

    def __enter__(self) -> _Guard:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None or not self.sink.lenient or not isinstance(exc, _LENIENT_CATCHES):
            return False
        text = str(exc) if isinstance(exc, EvalkitError) else f"{type(exc).__name__}: {exc}"
        self.sink.problems.append(LoadProblem(_short(text, self.file, self.row), None if self.file is None
                                              else str(self.file), self.row, self.items, self.where, self.kind))
        return True


def _short(message: str, file: object, row: str | None) -> str:
    """The message without the leading "FILE: " the strict messages carry (the problem names the file)."""
    text = " ".join(str(message).split())
    name = "" if file is None else str(file)
    if name and text.startswith(name + ":"):
        rest = text[len(name):]
        line = re.match(r":(\d+): ", rest)  # "FILE:12: ..." (JSONL readers name the line so)
        text = f"line {line.group(1)}: {rest[line.end():]}" if line else rest.removeprefix(": ")
    return text or (row or "unreadable")


STRICT = Sink()  # the run's loaders: every fault raises (stateless, so shared)
