"""Any multiple-choice set, in VLMEvalKit TSV form or in a simple JSONL form.

TSV: columns index, image (base64, or another row's index to reuse its image), question,
A..Z (any subset, empty cells skipped), answer, optional category, hint, image_path.
JSONL: one object per line with id, image or images (paths), question, options (dict or
list), answer (letter), optional category and hint.

Every bad row is an EvalkitError naming the file and the row, never a silent skip: a
benchmark quietly losing questions reports a wrong accuracy with full confidence.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import string
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..analysis.scoretable import ScoreTable
from ..errors import EvalkitError
from ..extract import is_refusal, judge_prompt_mcq, parse_letter, render_options, strip_reasoning
from ..metrics.basic import accuracy, accuracy_by
from ..protocols.circular import all_shifts, circular_summary
from ..protocols.rotation import rotation_queries, rotation_summary
from ..resources import fill_template, read_prompt
from ..types import GenParams, ImagePart, ImageRef, Item, Message, Parsed, Query, Record, Transform
from .base import Benchmark, JudgeRequest, accuracy_table, all_right_table

_KNOWN_TSV = {"index", "image", "image_path", "question", "answer", "category", "hint"}
_MISSING = {"", "nan", "NaN", "None"}  # how pandas-written TSVs spell an empty cell
_MAX_EXTRA_CHARS = 1000  # extra columns longer than this (images, blobs) stay out of meta


def _cell(value: Any) -> str:
    """A TSV cell as clean text, with pandas' spellings of "missing" made empty."""
    text = "" if value is None else str(value).strip()
    return "" if text in _MISSING else text


def _maybe_list(text: str) -> list[str] | None:
    """A cell holding a list literal (multi-image rows), else None."""
    if not text.startswith("["):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return [str(v) for v in value] if isinstance(value, list) else None


def _resolve_file(path: Path, base: Path, where: str) -> ImageRef:
    """An image path made absolute against `base`, which must exist."""
    full = path if path.is_absolute() else base / path
    if not full.is_file():
        raise EvalkitError(f"{where}: image file not found: {full}")
    return ImageRef.from_path(str(full))


def resolve_data(data: Path) -> Path:
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


def _raise_field_limit() -> None:
    """Base64 image cells are far over csv's default 128 KiB field limit."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:
            limit //= 2


def load_tsv(path: Path, images: Path | None = None) -> list[Item]:
    """Items from a VLMEvalKit-style TSV. Image paths resolve against `images`, else the TSV's folder."""
    _raise_field_limit()
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t", restval="")
            header = [h.strip() for h in (reader.fieldnames or [])]
            reader.fieldnames = header
            rows = list(reader)
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise EvalkitError(f"{path}: cannot read TSV ({exc})") from exc
    for column in ("index", "question", "answer"):
        if column not in header:
            raise EvalkitError(f"{path}: no '{column}' column (columns: {', '.join(header)})")
    if "image" not in header and "image_path" not in header:
        raise EvalkitError(f"{path}: no 'image' or 'image_path' column")
    letters = [h for h in header if len(h) == 1 and h in string.ascii_uppercase]
    if not letters:
        raise EvalkitError(f"{path}: no option columns (A, B, ...)")

    by_index: dict[str, int] = {}
    for k, row in enumerate(rows, start=1):
        idx = _cell(row.get("index"))
        if not idx:
            raise EvalkitError(f"{path}: row {k}: empty index")
        if idx in by_index:
            raise EvalkitError(f"{path}: row {k}: duplicate index {idx} (first at row {by_index[idx]})")
        by_index[idx] = k

    base = images or path.parent
    resolved: dict[int, tuple[ImageRef, ...]] = {}

    def images_of(k: int, seen: tuple[int, ...] = ()) -> tuple[ImageRef, ...]:
        """Row k's images, following index references (with cycle detection)."""
        if k in resolved:
            return resolved[k]
        row, where = rows[k - 1], f"{path}: row {k} (index {_cell(rows[k - 1].get('index'))})"
        cell = _cell(row.get("image"))
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
            cell = _cell(row.get("image_path"))
            if not cell:
                raise EvalkitError(f"{where}: no image (empty 'image' and 'image_path')")
            paths = _maybe_list(cell) or [cell]
            refs = tuple(_resolve_file(Path(p), base, where) for p in paths)
        resolved[k] = refs
        return refs

    items = []
    for k, row in enumerate(rows, start=1):
        idx = _cell(row.get("index"))
        where = f"{path}: row {k} (index {idx})"
        options = {x: _cell(row.get(x)) for x in letters if _cell(row.get(x))}
        extra = {
            h: _cell(row.get(h))
            for h in header
            if h not in _KNOWN_TSV and h not in letters and 0 < len(_cell(row.get(h))) <= _MAX_EXTRA_CHARS
        }
        items.append(
            _make_item(
                where,
                idx,
                question=_cell(row.get("question")),
                options=options,
                answer=_cell(row.get("answer")),
                images=images_of(k),
                category=_cell(row.get("category")),
                meta={"hint": _cell(row.get("hint")), "source": str(path), "row": k, **extra},
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


def _json_item(where: str, obj: Any, base: Path, source: Path) -> Item:
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
    return _make_item(
        where,
        str(raw_id).strip(),
        question=str(obj.get("question") or "").strip(),
        options=_json_options(where, obj.get("options") or {}),
        answer="" if answer is None else str(answer).strip(),
        images=tuple(_resolve_file(Path(p), base, where) for p in paths),
        category=str(obj.get("category") or "").strip(),
        meta={"hint": str(obj.get("hint") or "").strip(), "source": str(source)},
    )


def load_jsonl(path: Path, images: Path | None = None) -> list[Item]:
    """Items from JSONL (or a .json list). Image paths resolve against `images`, else the file's folder."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise EvalkitError(f"{path}: file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalkitError(f"{path}: cannot read ({exc})") from exc
    base = images or path.parent
    entries: list[tuple[str, Any]] = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalkitError(f"{path}: invalid JSON ({exc})") from exc
        if not isinstance(data, list):
            raise EvalkitError(f"{path}: expected a JSON list of questions")
        entries = [(f"{path}: item {k}", obj) for k, obj in enumerate(data, start=1)]
    else:
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((f"{path}: line {n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise EvalkitError(f"{path}: line {n}: invalid JSON ({exc.msg})") from exc
    items: list[Item] = []
    first: dict[str, str] = {}
    for where, obj in entries:
        item = _json_item(where, obj, base, path)
        if item.id in first:
            raise EvalkitError(f"{where}: duplicate id {item.id} (first at {first[item.id]})")
        first[item.id] = where.rsplit(": ", 1)[-1]
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
) -> Item:
    """An Item after the checks both forms share."""
    if not question:
        raise EvalkitError(f"{where}: empty question")
    if not options:
        raise EvalkitError(f"{where}: no options")
    if not answer:
        raise EvalkitError(f"{where}: no answer")
    if len(answer) == 1:
        answer = answer.upper()
    if answer not in options:
        raise EvalkitError(f"{where}: answer {answer!r} is not among the options {', '.join(options)}")
    return Item(
        id=item_id,
        question=question,
        options=options,
        answer=answer,
        images=images,
        category=category,
        meta=meta,
    )


def build_prompt(template: str, question: str, options: Mapping[str, str], hint: str = "") -> str:
    """The VLMEvalKit/TDBench MCQ text: optional "Hint: ...", question, lettered options, instruction."""
    return fill_template(
        template,
        hint=f"Hint: {hint}\n" if hint else "",
        question=question,
        options=render_options(options),
    )


class MCQ(Benchmark):
    """A generic multiple-choice benchmark: one query per item, accuracy overall and per category."""

    name = "mcq"
    description = "any multiple-choice set in VLMEvalKit TSV or JSONL form"
    default_data = "demo/mcq.tsv"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        if "--circular" not in parser._option_string_actions:  # shared `run` parser: add once
            parser.add_argument("--circular", action="store_true", default=None,
                                help="mcq: CircularEval, ask every rotation of the options (n per item)")
        if "--rotations" not in parser._option_string_actions:
            parser.add_argument("--rotations", type=int, choices=(1, 2, 4), default=None,
                                help="mcq: RotationalEval, ask each top-down image turned 0/90/180/270 degrees")

    def load(self, data: Path, images: Path | None, options: dict[str, Any]) -> list[Item]:
        path = resolve_data(Path(data))
        if path.suffix.lower() == ".tsv":
            return load_tsv(path, images)
        if path.suffix.lower() in (".jsonl", ".json"):
            return load_jsonl(path, images)
        raise EvalkitError(f"{path}: unknown format (expected .tsv, .jsonl or .json)")

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        template = read_prompt("mcq", "default.txt")
        transform = Transform(max_side=options.get("max_side"), max_pixels=options.get("max_pixels"))
        params = GenParams(temperature=0.0, max_tokens=int(options.get("max_tokens") or 1024))
        for item in items:
            hint = str(item.meta.get("hint") or "")
            text = build_prompt(template, item.question, item.options, hint)
            parts = [ImagePart(ref, transform) for ref in item.images]
            if (options.get("rotations") or 1) > 1:  # placeholders re-rendered, options shuffled per rotation
                yield from rotation_queries(item, lambda q, o, h=hint: build_prompt(template, q, o, h), transform,
                                            params, rotations=int(options["rotations"]))
                continue
            if options.get("circular"):
                for shift, shown, gold in all_shifts(item.options, item.answer):
                    yield Query(
                        id=f"{item.id}|s{shift}", item_id=item.id, base_id=item.id, variant={"shift": shift},
                        messages=(Message.user(*parts, build_prompt(template, item.question, shown, hint)),),
                        gold=gold, options=shown, params=params, category=item.category,
                        meta={"question": item.question, "hint": hint},
                    )
                continue
            yield Query(
                id=item.id,
                item_id=item.id,
                base_id=item.id,
                variant={},
                messages=(Message.user(*parts, text),),
                gold=item.answer,
                options=dict(item.options),
                params=params,
                category=item.category,
                meta={"question": item.question, "hint": hint},
            )

    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        text = strip_reasoning(text)
        if not text:
            return Parsed(None, "empty")
        letter = parse_letter(text, letters=tuple(query.options), options=query.options)
        if letter is not None:
            return Parsed(letter, "rule")
        if is_refusal(text):
            return Parsed(None, "refusal", refusal=True)
        return Parsed(None, "unparsed")

    def judge_request(self, query: Query, text: str) -> JudgeRequest | None:
        question = str(query.meta.get("question") or query.prompt_text())
        return JudgeRequest(
            prompt=judge_prompt_mcq(question, query.options, strip_reasoning(text)),
            valid=tuple(query.options),
        )

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        has_categories = any(r.category for r in records)
        if any("rot" in r.variant for r in records):  # --rotations: RE / VE / MA and reliability (θ, r, g)
            return {**rotation_summary(records), "accuracy": accuracy(records), "n": len(records)}
        if any("shift" in r.variant for r in records):  # --circular: CircularEval on top of plain accuracy
            per = accuracy_by(records, lambda r: r.category or "(none)") if has_categories else {}
            return {**circular_summary(records), "accuracy": accuracy(records), "per_category": per, "n": len(records)}
        return {
            "accuracy": accuracy(records),
            "per_category": accuracy_by(records, lambda r: r.category or "(none)") if has_categories else {},
            "n": len(records),
        }

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """accuracy (%) per record; --circular: circular_accuracy (%), 1 per base question when all its
        shifts are right; --rotations: RE (a fraction), 1 per base question right at every rotation."""
        if any("rot" in r.variant for r in records):
            return all_right_table(records, "RE", 1.0)
        if any("shift" in r.variant for r in records):
            return all_right_table(records, "circular_accuracy", 100.0)
        return accuracy_table(records)
