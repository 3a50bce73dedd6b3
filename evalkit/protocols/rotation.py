"""Rotational evaluation for any top-down set (TDBench paper §3.4).

Each image is asked at 0, 90, 180 and 270 degrees. **Direction: counter-clockwise**, the
convention of `Transform.rotate` and PIL, so variant {"rot": 90} means the picture was turned
a quarter turn to the left (what was on the right is now at the top).

Rotation-invariant questions keep their text. Rotation-sensitive ones write directions as
placeholder tokens, re-rendered per rotation so the words follow the picture:

    <dir:NAME>      top, bottom, left, right, top-left, top-right, bottom-left, bottom-right
    <Dir:NAME>      the same, capitalised
    <cell:R,C>      a 3x3 grid cell, 1-based row and column -> "row R, column C"
    <cellname:R,C>  the same cell by name -> "top-left", "middle-right", "center", ...
    <Cellname:R,C>  the same, capitalised

Options are shuffled per rotation with a seed (paper: "choices generated separately for each
rotation"), and the gold letter moves with its text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from evalkit.core.record import Record
from evalkit.core.types import GenParams, ImagePart, Item, Message, Query, Transform

ROTATIONS: tuple[int, ...] = (0, 90, 180, 270)

_DIRS: dict[str, tuple[int, int]] = {  # (dx, dy) with y pointing down, as in image coordinates
    "top": (0, -1), "bottom": (0, 1), "left": (-1, 0), "right": (1, 0),
    "top-left": (-1, -1), "top-right": (1, -1), "bottom-left": (-1, 1), "bottom-right": (1, 1),
}
_DIR_NAMES = {v: k for k, v in _DIRS.items()}
_ROW_NAMES = ("top", "middle", "bottom")
_COL_NAMES = ("left", "center", "right")
_TOKEN = re.compile(r"<(dir|Dir|cell|cellname|Cellname):([^<>]*)>")


class PlaceholderError(ValueError):
    """A malformed placeholder token (unknown direction, cell outside the 3x3 grid)."""


def _check(deg: int) -> int:
    if deg % 90:
        raise ValueError(f"rotation must be a multiple of 90 degrees, got {deg}")
    return deg % 360


def rotate_vector(dx: int, dy: int, deg: int) -> tuple[int, int]:
    """A direction after turning the image `deg` counter-clockwise (y down): right -> top."""
    for _ in range(_check(deg) // 90):
        dx, dy = dy, -dx
    return dx, dy


def rotate_point(x: float, y: float, deg: int) -> tuple[float, float]:
    """Relative coordinates (0..1, origin top-left) of a point after a counter-clockwise turn."""
    for _ in range(_check(deg) // 90):
        x, y = y, 1.0 - x
    return x, y


def rotate_box(box: tuple[float, float, float, float], deg: int) -> tuple[float, float, float, float]:
    """A relative box [x1, y1, x2, y2] after a counter-clockwise turn (corners re-ordered)."""
    ax, ay = rotate_point(box[0], box[1], deg)
    bx, by = rotate_point(box[2], box[3], deg)
    return min(ax, bx), min(ay, by), max(ax, bx), max(ay, by)


def rotate_cell(row: int, col: int, deg: int, n: int = 3) -> tuple[int, int]:
    """A 1-based (row, column) cell of an n x n grid after a counter-clockwise turn."""
    r, c = row - 1, col - 1
    for _ in range(_check(deg) // 90):
        r, c = n - 1 - c, r
    return r + 1, c + 1


def cell_name(row: int, col: int) -> str:
    """Name of a 3x3 cell: "top-left" ... "center" ... "bottom-right"."""
    if (row, col) == (2, 2):
        return "center"
    return f"{_ROW_NAMES[row - 1]}-{_COL_NAMES[col - 1]}"


def parse_cell_name(name: str) -> tuple[int, int]:
    """Inverse of cell_name (for tests and tools)."""
    name = name.strip().lower()
    if name == "center":
        return 2, 2
    row, _, col = name.partition("-")
    if row not in _ROW_NAMES or col not in _COL_NAMES:
        raise PlaceholderError(f"not a 3x3 cell name: {name!r}")
    return _ROW_NAMES.index(row) + 1, _COL_NAMES.index(col) + 1


def _cell_arg(arg: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*([1-3])\s*,\s*([1-3])\s*", arg)
    if not m:
        raise PlaceholderError(f"cell placeholder needs 'row,column' in 1..3, got {arg!r}")
    return int(m.group(1)), int(m.group(2))


def _render_token(kind: str, arg: str, deg: int) -> str:
    if kind in ("dir", "Dir"):
        name = arg.strip().lower()
        if name not in _DIRS:
            raise PlaceholderError(f"unknown direction {arg!r} (known: {', '.join(_DIRS)})")
        word = _DIR_NAMES[rotate_vector(*_DIRS[name], deg)]
        return word.capitalize() if kind == "Dir" else word
    row, col = rotate_cell(*_cell_arg(arg), deg)
    if kind == "cell":
        return f"row {row}, column {col}"
    word = cell_name(row, col)
    return word.capitalize() if kind == "Cellname" else word


def render(text: str, deg: int) -> str:
    """Text with every placeholder token re-rendered for the image turned `deg` counter-clockwise."""
    _check(deg)
    return _TOKEN.sub(lambda m: _render_token(m.group(1), m.group(2), deg), text)


def validate(text: str) -> None:
    """Raise PlaceholderError for a malformed token, and for a stray '<dir' that is not a token."""
    render(text, 0)
    leftover = re.sub(_TOKEN, "", text)
    if re.search(r"<(?:dir|cell|cellname)\s*:", leftover, re.I):
        raise PlaceholderError(f"malformed placeholder in {text!r}")


def shuffle_options(options: Mapping[str, str], answer: str, seed: int | str,
                    key: str) -> tuple[dict[str, str], str]:
    """(options with their texts permuted, the gold letter there), deterministic in (seed, key)."""
    letters = list(options)
    if answer not in options:
        raise ValueError(f"answer {answer!r} is not among the options {', '.join(letters)}")
    order = list(range(len(letters)))
    random.Random(f"{seed}|{key}").shuffle(order)
    texts = [options[k] for k in letters]
    shown = {letters[j]: texts[order[j]] for j in range(len(letters))}
    gold = letters[order.index(letters.index(answer))]
    return shown, gold


def rotate_question(question: str, options: Mapping[str, str], answer: str, deg: int, *,
                    seed: int | str = 0, key: str = "", shuffle: bool = True) -> tuple[str, dict[str, str], str]:
    """One rotation's (question, options, gold): placeholders rendered, options shuffled per rotation."""
    rendered = {k: render(v, deg) for k, v in options.items()}
    if shuffle and rendered:
        rendered, answer = shuffle_options(rendered, answer, seed, f"{key}|r{deg}")
    return render(question, deg), rendered, answer


# ---------------------------------------------------------------------------------------
# Queries and summary for any MCQ set (`evalkit run mcq --rotations 4`)
# ---------------------------------------------------------------------------------------


def rotation_queries(item: Item, build_text: Callable[[str, dict[str, str]], str], transform: Transform,
                     params: GenParams, *, rotations: int = 4, seed: int = 0) -> list[Query]:
    """One query per rotation of an MCQ item: image turned, placeholders re-rendered, options shuffled."""
    if rotations not in (1, 2, 4):
        raise ValueError(f"rotations must be 1, 2 or 4, got {rotations}")
    out = []
    for deg in ROTATIONS[:: 4 // rotations]:
        question, shown, gold = rotate_question(item.question, item.options, item.answer, deg, seed=seed,
                                                key=item.id)
        parts = [ImagePart(ref, replace(transform, rotate=deg)) for ref in item.images]
        out.append(Query(id=f"{item.id}|r{deg}", item_id=item.id, base_id=item.id, variant={"rot": deg},
                         messages=(Message.user(*parts, build_text(question, shown)),), gold=gold, options=shown,
                         params=params, category=item.category, meta={**item.meta, "question": question}))
    return out


def rotation_summary(records: Sequence[Record]) -> dict[str, Any]:
    """RE / VE / MA over base questions (fractions) and the reliability fit of their groups."""
    from evalkit.metrics.reliability import consistency, group_counts, reliability_summary

    counts = group_counts(records)
    return {**consistency(counts), "reliability": reliability_summary(records, n_boot=100)}
