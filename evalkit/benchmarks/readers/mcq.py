"""Reading multiple-choice sets: VLMEvalKit TSV and a simple JSONL form, into Items.

TSV: columns index, image (base64, or another row's index to reuse its image), question,
A..Z (any subset, empty cells skipped), answer, optional category, hint, image_path.
JSONL: one object per line with id, image or images (paths), question, options (dict or
list), answer (letter), optional category and hint. Shared by the benchmarks that read
VLMEvalKit TSVs (mcq, TDBench, MME-RealWorld).

Every bad row is an EvalkitError naming the file and the row, never a silent skip: a
benchmark quietly losing questions reports a wrong accuracy with full confidence. The TSV rows
themselves (csv rules, streamed images, row checks) are read by vlmeval_tsv.py.
"""

from __future__ import annotations

import ast
import json
import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.vlmeval_tsv import clean_cell, csv_rows, spelled_missing, streamed_rows
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.text import data_json
from evalkit.core.types import ImageRef, Item
from evalkit.images.files import not_a_file

_KNOWN_TSV = {"index", "image", "image_path", "question", "answer", "category", "hint"}
_MAX_EXTRA_CHARS = 1000  # extra columns longer than this (images, blobs) stay out of meta


def _maybe_list(text: str) -> list[str] | None:
    """A cell holding a list literal (multi-image rows), else None."""
    if not text.startswith("["):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return [str(v) for v in value] if isinstance(value, list) else None


class ImagePaths:
    """One data file's image paths made absolute against `base`, which must exist (lenient: kept for
    lint to name), each distinct path checked once: questions share pictures (MME-RealWorld asks
    several about each), and a stat per question was a tenth of a large set's load. A path that is not
    a file is still reported for every row naming it."""

    def __init__(self, base: Path, sink: Sink = STRICT):
        self.base = base
        self.sink = sink
        # path as written -> (its ref, problem): questions sharing a picture share one ref
        self._seen: dict[str, tuple[ImageRef, str | None]] = {}

    def ref(self, path: str, where: str) -> ImageRef:
        seen = self._seen.get(path)
        if seen is None:
            given = Path(path)
            full = given if given.is_absolute() else self.base / given
            # missing, a named pipe, a folder, a loop
            seen = self._seen[path] = (ImageRef.from_path(str(full)), not_a_file(full))
        ref, problem = seen
        if problem is not None:
            self.sink.content(f"{where}: {problem}: {ref.value}")
        return ref


def single_data_file(data: Path) -> Path:
    """The data file: `data` itself, or the single .tsv/.jsonl/.json file in a folder."""
    if data.is_dir():
        found = sorted(p for p in data.iterdir() if p.suffix.lower() in (".tsv", ".jsonl", ".json"))
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise EvalkitError(f"{data}: expected one .tsv/.jsonl/.json file in the folder, found {names}")
        return found[0]
    if not data.is_file():
        raise EvalkitError(f"{data}: file not found")
    return data


# ---------------------------------------------------------------------------------------
# TSV (VLMEvalKit form)
# ---------------------------------------------------------------------------------------


_LISTED = re.compile(r"^\s*\(([A-Z])\)\s*")


def listed_options(where: str, cell: Any) -> dict[str, str]:
    """A cell holding the options as a list literal of "(A) text" strings (MME-RealWorld's
    'multi-choice options') -> letter -> text, every option kept (empty ones too); the letter comes
    from "(X)", else from the position."""
    text = clean_cell(cell)
    try:
        value = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvalkitError(f"{where}: the options cell is not a list of strings ({text[:60]!r})")
    out: dict[str, str] = {}
    for k, choice in enumerate(value):
        m = _LISTED.match(choice)
        letter = m.group(1) if m else string.ascii_uppercase[min(k, 25)]
        if letter in out:
            raise EvalkitError(f"{where}: option ({letter}) appears twice")
        out[letter] = choice[m.end():].strip() if m else choice.strip()
    return out


def load_tsv(path: Path, images: Path | None = None, sink: Sink = STRICT, *, stream: bool = False,
             options_column: str | None = None, gold_may_be_missing: bool = False) -> list[Item]:
    """Items from a VLMEvalKit-style TSV. Image paths resolve against `images`, else the TSV's folder.
    Lenient (`sink`, see benchmarks.lenient): bad rows are problems, the other rows items.
    `stream`: read forward with the base64 images left in the file (span refs, read when asked),
    for TSVs of gigabytes. `options_column`: a column holding the options as a list literal, read
    when there are no A, B, ... columns. `gold_may_be_missing` (TDBench official mode): an item whose
    gold option's cell holds "None" (or "nan", "NaN"), which VLMEvalKit's pandas reads as missing, is kept
    as that pipeline keeps it: the option left out, so no reply can be right; the meta of every row holding
    such cells names them (`dropped_options`)."""
    header, rows = streamed_rows(path, sink) if stream else csv_rows(path, sink)
    for column in ("index", "question", "answer"):
        if column not in header:
            raise EvalkitError(f"{path}: no '{column}' column (columns: {', '.join(header)})")
    if "image" not in header and "image_path" not in header:
        raise EvalkitError(f"{path}: no 'image' or 'image_path' column")
    letters = [h for h in header if len(h) == 1 and h in string.ascii_uppercase]
    listed = options_column if not letters and options_column in header else None
    if not letters and not listed:
        also = f" and no '{options_column}' column" if options_column else ""
        raise EvalkitError(f"{path}: no option columns (A, B, ...){also}")

    by_index: dict[str, int] = {}
    for k, row in list(rows.items()):
        idx = clean_cell(row.get("index"))
        if not idx:
            sink.add(f"{path}: row {k}: empty index", path, row=f"row {k}")
        elif idx in by_index:
            sink.add(f"{path}: row {k}: duplicate index {idx} (first at row {by_index[idx]})", path, row=f"row {k}",
                     items=(idx,), kind="duplicate-id")
        else:
            by_index[idx] = k
            continue
        del rows[k]  # lenient: the row is a problem, not an item

    paths_of = ImagePaths(images or path.parent, sink)
    resolved: dict[int, tuple[ImageRef, ...]] = {}

    def images_of(k: int, seen: tuple[int, ...] = ()) -> tuple[ImageRef, ...]:
        """Row k's images, following index references (with cycle detection)."""
        if k in resolved:
            return resolved[k]
        row, where = rows[k], f"{path}: row {k} (index {clean_cell(rows[k].get('index'))})"
        if isinstance(row.get("image"), ImageRef):  # a streamed base64 cell, left in the file
            resolved[k] = (row["image"],)
            return resolved[k]
        cell = clean_cell(row.get("image"))
        if cell.isdigit() and len(cell) <= 32:
            target = by_index.get(cell)
            if target is None:
                raise EvalkitError(f"{where}: image refers to index {cell}, which is not in the file")
            if target in seen or target == k:
                raise EvalkitError(f"{where}: image references form a cycle")
            refs = images_of(target, (*seen, k))
        elif cell:
            listed = _maybe_list(cell)
            refs = tuple(ImageRef.from_b64(v) for v in listed) if listed else (ImageRef.from_b64(cell),)
        else:
            cell = clean_cell(row.get("image_path"))
            if not cell:
                raise EvalkitError(f"{where}: no image (empty 'image' and 'image_path')")
            paths = _maybe_list(cell) or [cell]
            refs = tuple(paths_of.ref(p, where) for p in paths)
        resolved[k] = refs
        return refs

    items = []
    for k, row in rows.items():
        idx = clean_cell(row.get("index"))
        where = f"{path}: row {k} (index {idx})"
        extra = {
            h: clean_cell(row.get(h))
            for h in header
            if h not in _KNOWN_TSV and h not in letters and not isinstance(row.get(h), ImageRef)
            and 0 < len(clean_cell(row.get(h))) <= _MAX_EXTRA_CHARS
        }
        with sink.guard(path, row=f"row {k}", items=(idx,)):
            cells = listed_options(where, row.get(listed)) if listed else {x: clean_cell(row.get(x)) for x in letters}
            options = {x: v for x, v in cells.items() if v}
            meta = {"hint": clean_cell(row.get("hint")), "source": str(path), "row": k, **extra}
            dropped = [] if listed or not gold_may_be_missing else [x for x in letters if spelled_missing(row.get(x))]
            if dropped:
                meta["dropped_options"] = dropped
            if sink.lenient:  # what lint's option and image checks need beyond the item (not in a run's items)
                meta["lint_option_cells"] = cells
                ref = "" if isinstance(row.get("image"), ImageRef) else clean_cell(row.get("image"))
                if ref.isdigit() and len(ref) <= 32:
                    meta["lint_image_from"] = ref  # shares another row's image on purpose
            items.append(
                _make_item(
                    where,
                    idx,
                    question=clean_cell(row.get("question")),
                    options=options,
                    answer=clean_cell(row.get("answer")),
                    images=images_of(k),
                    category=clean_cell(row.get("category")),
                    meta=meta,
                    sink=sink,
                    gold_dropped=clean_cell(row.get("answer")).upper() in dropped,
                )
            )
    return items


# ---------------------------------------------------------------------------------------
# JSONL form
# ---------------------------------------------------------------------------------------


def _json_options(where: str, raw: Any) -> dict[str, str]:
    """`options` as a dict letter->text (a list is lettered A, B, C... by position)."""
    if isinstance(raw, list):
        raw = {string.ascii_uppercase[i]: v for i, v in enumerate(raw[:26])}
    if not isinstance(raw, Mapping):
        raise EvalkitError(f"{where}: 'options' must be an object or a list")
    options = {}
    for key, value in raw.items():
        letter = str(key).strip().upper()
        if len(letter) != 1 or letter not in string.ascii_uppercase:
            raise EvalkitError(f"{where}: option key {key!r} is not a letter")
        text = "" if value is None else str(value).strip()
        if text:
            options[letter] = text
    return options


def _json_item(where: str, obj: Any, paths_of: ImagePaths, source: Path, sink: Sink = STRICT) -> Item:
    if not isinstance(obj, Mapping):
        raise EvalkitError(f"{where}: expected a JSON object")
    raw_id = obj.get("id", obj.get("index"))
    if raw_id is None or str(raw_id).strip() == "":
        raise EvalkitError(f"{where}: no 'id'")
    paths = obj.get("images", obj.get("image"))
    if isinstance(paths, str):
        paths = [paths]
    if not paths or not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise EvalkitError(f"{where}: no image ('image' path or 'images' list)")
    answer = obj.get("answer")
    meta: dict[str, Any] = {"hint": str(obj.get("hint") or "").strip(), "source": str(source)}
    if sink.lenient:  # every option as given, empty ones too, for lint's empty-option check
        meta["lint_option_cells"] = option_cells(obj.get("options"))
    return _make_item(
        where,
        str(raw_id).strip(),
        question=str(obj.get("question") or "").strip(),
        options=_json_options(where, obj.get("options") or {}),
        answer="" if answer is None else str(answer).strip(),
        images=tuple(paths_of.ref(p, where) for p in paths),
        category=str(obj.get("category") or "").strip(),
        meta=meta,
        sink=sink,
    )


def option_cells(raw: Any) -> dict[str, str]:
    """JSON `options` as letter -> text with the empty ones kept (what `_json_options` skips)."""
    if isinstance(raw, list):
        raw = {string.ascii_uppercase[i]: v for i, v in enumerate(raw[:26])}
    if not isinstance(raw, Mapping):
        return {}
    return {str(k).strip().upper(): "" if v is None else str(v).strip() for k, v in raw.items()}


def load_jsonl(path: Path, images: Path | None = None, sink: Sink = STRICT) -> list[Item]:
    """Items from JSONL (or a .json list). Image paths resolve against `images`, else the file's folder.
    Lenient (`sink`): bad lines are problems, the other lines items."""
    base = images or path.parent
    entries: list[tuple[str, Any]] = []
    try:
        if path.suffix.lower() == ".json":
            try:
                data = data_json.loads(read_caps.read_whole(path))
            except json.JSONDecodeError as exc:
                raise EvalkitError(f"{path}: invalid JSON ({exc})") from exc
            if not isinstance(data, list):
                raise EvalkitError(f"{path}: expected a JSON list of questions")
            entries = [(f"{path}: item {k}", obj) for k, obj in enumerate(data, start=1)]
        else:  # line by line: the file is never held whole, and a line over the cap is never read
            for n, line in read_caps.text_lines(path):
                if line is None:
                    sink.add(f"{path}: line {n}: the line is {read_caps.over_line_cap()}", path, row=f"line {n}")
                    continue
                if not line.strip():
                    continue
                try:
                    entries.append((f"{path}: line {n}", data_json.loads(line)))
                except json.JSONDecodeError as exc:
                    sink.add(f"{path}: line {n}: invalid JSON ({exc.msg})", path, row=f"line {n}")
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalkitError(f"{path}: cannot read ({exc})") from exc
    items: list[Item] = []
    first: dict[str, str] = {}
    paths_of = ImagePaths(base, sink)
    for where, obj in entries:
        row = where.rsplit(": ", 1)[-1]
        with sink.guard(path, row=row):
            item = _json_item(where, obj, paths_of, path, sink)
            if item.id in first:
                sink.add(f"{where}: duplicate id {item.id} (first at {first[item.id]})", path, row=row,
                         items=(item.id,), kind="duplicate-id")
                continue
            first[item.id] = row
            items.append(item)
    return items


# ---------------------------------------------------------------------------------------
# Shared validation and prompt
# ---------------------------------------------------------------------------------------


def _make_item(
    where: str,
    item_id: str,
    *,
    question: str,
    options: dict[str, str],
    answer: str,
    images: tuple[ImageRef, ...],
    category: str,
    meta: dict[str, Any],
    sink: Sink = STRICT,
    gold_dropped: bool = False,
) -> Item:
    """An Item after the checks both forms share (lenient: kept as read, for lint's checks to name).
    `gold_dropped`: the gold's cell was read as missing and the caller keeps such items (load_tsv)."""
    if not question:
        sink.content(f"{where}: empty question")
    if not options:
        sink.content(f"{where}: no options")
    if not answer:
        sink.content(f"{where}: no answer")
    if len(answer) == 1:
        answer = answer.upper()
    if answer not in options and not gold_dropped:
        sink.content(f"{where}: answer {answer!r} is not among the options {', '.join(options)}")
    return Item(
        id=item_id,
        question=question,
        options=options,
        answer=answer,
        images=images,
        category=category,
        meta=meta,
    )
