"""TDBench files: the official four-TSV release, the generated JSONL form, each rotation's question
and picture, and export (boxes: tdbench_boxes.py).

Kept apart from the benchmark class so the case-study tools and the sample generator can
read and write the same forms without the runner.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.mcq import ImagePaths, _json_options, load_tsv, option_cells
from evalkit.benchmarks.readers.vlmeval_tsv import check_extra_cells, clean_cell, dict_reader
from evalkit.benchmarks.tdbench_boxes import format_box, parse_gold_box, source_size
from evalkit.core import read_caps
from evalkit.core.errors import EvalkitError
from evalkit.core.inline import inline_bytes
from evalkit.core.text import data_json
from evalkit.core.types import ImageRef, Item
from evalkit.images.ops import rotate_image, to_rgb
from evalkit.metrics.tdbench import CATEGORIES
from evalkit.protocols import rotation as rot

if TYPE_CHECKING:
    from PIL import Image

ROT_FILE = re.compile(r"^(?P<prefix>.+?)_rot(?P<deg>0|90|180|270)\.tsv$", re.I)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_CANON = {_key(c): c for c in CATEGORIES}


def canonical_category(name: str, where: str, strict: bool) -> str:
    """The paper's spelling of a category; unknown names are an error unless strict is off."""
    found = _CANON.get(_key(name))
    if found:
        return found
    if strict:
        raise EvalkitError(f"{where}: unknown category {name!r} (known: {', '.join(CATEGORIES)}; "
                           f"--td-any-category accepts others)")
    if not name:
        raise EvalkitError(f"{where}: empty category")
    return name


# ---------------------------------------------------------------------------------------
# Official form
# ---------------------------------------------------------------------------------------


def official_files(folder: Path) -> dict[str, dict[int, Path]]:
    """prefix -> {rotation: file} for every "<prefix>_rot<deg>.tsv" in a folder."""
    out: dict[str, dict[int, Path]] = {}
    for p in sorted(folder.iterdir()):
        m = ROT_FILE.match(p.name)
        if m:
            out.setdefault(m.group("prefix"), {})[int(m.group("deg"))] = p
    return out


def _read_rows(path: Path) -> tuple[int, list[tuple[int, dict[Any, Any]]]]:
    """(the header's number of columns, each row with the line it ends on; cells past the header's
    columns are under the key None, as csv files them)."""
    with dict_reader(path) as reader:
        return len(reader.fieldnames or []), [(reader.line_num, row) for row in reader]


def _grounding_rows(path: Path, sink: Sink = STRICT) -> dict[str, dict[str, Any]]:
    columns, rows = _read_rows(path)
    out: dict[str, dict[str, Any]] = {}
    for k, (line, row) in enumerate(rows, start=1):
        idx = clean_cell(row.get("index"))
        where = f"{path}: row {k} (index {idx})"
        with sink.guard(path, row=f"row {k}", items=(idx,) if idx else ()):
            check_extra_cells(path, k, line, columns, row.pop(None, None) or [])
            if not idx or idx in out:
                raise EvalkitError(f"{where}: empty or duplicate index")
            b64 = clean_cell(row.get("image"))
            if not b64:
                raise EvalkitError(f"{where}: no image")
            ref = ImageRef.from_b64(b64)
            try:
                size = source_size(ref)
            except Exception as exc:  # noqa: BLE001 - any decode failure is a bad row
                raise EvalkitError(f"{where}: image is not a decodable base64 picture ({exc})") from exc
            obj = clean_cell(row.get("question"))
            if not obj:
                raise EvalkitError(f"{where}: empty question (the object name)")
            box = parse_gold_box(clean_cell(row.get("answer")), where, size)
            out[idx] = {"question": obj, "options": {}, "answer": format_box(box), "images": (ref,),
                        "category": clean_cell(row.get("category")) or "Visual Grounding", "where": where}
    return out


def load_official(files: dict[int, Path], *, grounding: bool = False, strict: bool = True,
                  sink: Sink = STRICT, gold_may_be_missing: bool = False) -> list[Item]:
    """One Item per index, its rotations joined from the files; a missing index is an error.
    `gold_may_be_missing`: official mode's reading of option cells holding "None" (mcq.load_tsv); each
    rotation's `dropped_options` are kept in its variant.

    Lenient (`sink`): a rotation file that lacks indices of the others, or an index whose category
    differs across rotations, is a "rotation-mismatch" problem; the index is still an item (with the
    rotations it has, the first file's category), so its text is checked too."""
    per_rot: dict[int, dict[str, dict[str, Any]]] = {}
    for deg, path in sorted(files.items()):
        with sink.guard(path, kind="unreadable-file"):
            if grounding:
                per_rot[deg] = _grounding_rows(path, sink)
            else:
                per_rot[deg] = {
                    it.id: {"question": it.question, "options": dict(it.options), "answer": it.answer,
                            "images": it.images, "category": it.category, "hint": it.meta.get("hint") or "",
                            "where": f"{path}: row {it.meta['row']}",
                            "dropped_options": list(it.meta.get("dropped_options") or ()),
                            **({"lint_option_cells": it.meta.get("lint_option_cells")} if sink.lenient else {})}
                    for it in load_tsv(path, None, sink, gold_may_be_missing=gold_may_be_missing)
                }
    degs = sorted(per_rot)
    for deg in degs:
        for other in degs:
            missing = [i for i in per_rot[other] if i not in per_rot[deg]]
            if missing:
                sink.add(f"{files[deg]}: index {missing[0]} (in {files[other].name}) is missing "
                         f"from this rotation file ({len(missing)} missing)", files[deg], items=missing,
                         kind="rotation-mismatch")
                break  # (lenient) one problem per file: its missing indices are named once
    items = []
    order = list(dict.fromkeys(i for d in degs for i in per_rot[d]))  # the first file's order, then the rest
    for idx in order:
        have = [d for d in degs if idx in per_rot[d]]
        row = per_rot[have[0]][idx]
        with sink.guard(files[have[0]], items=(idx,)):
            cats = {canonical_category(per_rot[d][idx]["category"], per_rot[d][idx]["where"], strict) for d in have}
            if len(cats) > 1:
                sink.add(f"{row['where']}: index {idx} has different categories across rotations: "
                         f"{', '.join(sorted(cats))}", files[have[0]], row=row["where"].rsplit(": ", 1)[-1],
                         items=(idx,), kind="rotation-mismatch")
            keys = ("question", "options", "answer", "images", "hint") + (("where", "lint_option_cells", "category")
                                                                          if sink.lenient else ())
            variants = {d: {k: per_rot[d][idx].get(k, "") for k in keys} for d in have}
            for d in have:  # only where a cell was read as missing: variants stay as they were otherwise
                if per_rot[d][idx].get("dropped_options"):
                    variants[d]["dropped_options"] = per_rot[d][idx]["dropped_options"]
            category = canonical_category(row["category"], row["where"], strict)
            items.append(Item(idx, row["question"], row["options"], row["answer"], row["images"], category,
                              {"form": "official", "task": "grounding" if grounding else "mcq", "variants": variants,
                               "source": str(files[degs[0]])}))
    return items


# ---------------------------------------------------------------------------------------
# Generated form (JSONL with image paths and templated text)
# ---------------------------------------------------------------------------------------


def load_generated(path: Path, images: Path | None = None, sink: Sink = STRICT) -> list[Item]:
    """Items of a custom top-down set; placeholders and boxes are checked here, not at ask time.

    A line: {"id", "image" | "images" (two, with "layout": "h" | "v"), "question", "options",
    "answer", "category", optional "task": "grounding" with "box": [x1, y1, x2, y2] (relative)
    and the object name as "question", optional "shuffle": false}.
    """
    paths_of = ImagePaths(images or path.parent, sink)
    items: list[Item] = []
    seen: set[str] = set()
    for n, line in read_caps.data_lines(path):  # line by line, under the cap
        if line is not None and not line.strip():
            continue
        where = f"{path}: line {n}"
        with sink.guard(path, row=f"line {n}"):
            if line is None:
                raise EvalkitError(f"{where}: the line is {read_caps.over_line_cap()}")
            try:
                obj = data_json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalkitError(f"{where}: invalid JSON ({exc.msg})") from exc
            item = _generated_item(where, obj, paths_of, sink)
            if item.id in seen:
                sink.add(f"{where}: duplicate id {item.id}", path, row=f"line {n}", items=(item.id,),
                         kind="duplicate-id")
                continue
            items.append(item)
            seen.add(item.id)
    return items


def _generated_item(where: str, obj: Any, paths_of: ImagePaths, sink: Sink = STRICT) -> Item:
    if not isinstance(obj, dict):
        raise EvalkitError(f"{where}: expected a JSON object")
    item_id = str(obj.get("id", obj.get("index", ""))).strip()
    if not item_id or "|" in item_id:
        raise EvalkitError(f"{where}: missing id (or one containing '|')")
    paths = obj.get("images", obj.get("image"))
    paths = [paths] if isinstance(paths, str) else paths
    if not isinstance(paths, list) or len(paths) not in (1, 2) or not all(isinstance(p, str) for p in paths):
        raise EvalkitError(f"{where}: 'image' must be a path or 'images' a list of one or two paths")
    refs = tuple(paths_of.ref(p, where) for p in paths)
    layout = str(obj.get("layout") or "h")
    if layout not in ("h", "v"):
        raise EvalkitError(f"{where}: layout must be 'h' or 'v'")
    question = str(obj.get("question") or "").strip()
    category = str(obj.get("category") or "").strip()
    if not question or not category:
        raise EvalkitError(f"{where}: empty question or category")
    task = str(obj.get("task") or "mcq")
    meta: dict[str, Any] = {"form": "generated", "task": task, "layout": layout,
                            "shuffle": bool(obj.get("shuffle", True)), "source": where}
    try:
        rot.validate(question)
        if task == "grounding":
            if len(refs) != 1:
                raise EvalkitError(f"{where}: a grounding item needs exactly one image")
            box = parse_gold_box(json.dumps(obj.get("box")), where, None)
            return Item(item_id, question, {}, format_box(box), refs, category, {**meta, "box": box})
        if task != "mcq":
            raise EvalkitError(f"{where}: unknown task {task!r} (expected 'mcq' or 'grounding')")
        options = _json_options(where, obj.get("options") or {})
        for text in options.values():
            rot.validate(text)
    except rot.PlaceholderError as exc:
        raise EvalkitError(f"{where}: {exc}") from exc
    answer = str(obj.get("answer") or "").strip().upper()
    if not options or answer not in options:
        sink.content(f"{where}: answer {answer!r} is not among the options {', '.join(options)}")
    if sink.lenient:
        meta["lint_option_cells"] = option_cells(obj.get("options"))
    return Item(item_id, question, options, answer, refs, category, meta)


# ---------------------------------------------------------------------------------------
# One rotation of an item: its question, options and gold, and its picture
# ---------------------------------------------------------------------------------------


def join_canvas(images: Sequence[Image.Image], layout: str, size: int = 512) -> Image.Image:
    """Two images on one size x size canvas: side by side ("h", two size/2-wide halves) or stacked ("v")."""
    from PIL import Image

    if len(images) != 2:
        raise EvalkitError(f"a joined canvas needs exactly two images, got {len(images)}")
    canvas = Image.new("RGB", (size, size))
    half = size // 2
    for i, img in enumerate(images):
        if layout == "h":
            canvas.paste(to_rgb(img).resize((half, size), Image.Resampling.LANCZOS), (i * half, 0))
        elif layout == "v":
            canvas.paste(to_rgb(img).resize((size, half), Image.Resampling.LANCZOS), (0, i * half))
        else:
            raise EvalkitError(f"unknown two-image layout {layout!r} (expected 'h' or 'v')")
    return canvas


def _open(ref: ImageRef) -> Image.Image:
    from PIL import Image

    with Image.open(str(ref.value) if ref.kind == "path" else io.BytesIO(inline_bytes(ref))) as img:
        img.load()
        return to_rgb(img).copy()


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def variant_text(item: Item, deg: int, seed: int) -> tuple[str, dict[str, str], str]:
    """(question, options, gold) of one rotation; grounding gold is the rotated box."""
    if item.meta.get("form") == "official":
        v = item.meta["variants"][deg]
        return v["question"], dict(v["options"]), v["answer"]
    if item.meta.get("task") == "grounding":
        return item.question, {}, format_box(rot.rotate_box(item.meta["box"], deg))
    return rot.rotate_question(item.question, item.options, item.answer, deg, seed=seed, key=item.id,
                               shuffle=bool(item.meta.get("shuffle", True)))


def variant_image(item: Item, deg: int, size: int = 512) -> Image.Image:
    """The picture a generated item shows at one rotation (each half turned on its own)."""
    pics = [rotate_image(_open(ref), deg) for ref in item.images]
    if len(pics) == 1:
        return pics[0]
    return join_canvas(pics, str(item.meta.get("layout") or "h"), size)


# ---------------------------------------------------------------------------------------
# Export: a generated set as the official four TSVs
# ---------------------------------------------------------------------------------------


def export_official(items: Sequence[Item], folder: Path, *, seed: int = 0, prefix: str = "tdbench",
                    size: int = 512) -> list[Path]:
    """Write `<prefix>_rot<deg>.tsv` (and `<prefix>_grounding_rot<deg>.tsv` for grounding items).

    Each rotation file holds the rotated picture (base64 PNG), the re-rendered question, the
    options shuffled for that rotation and the gold letter there: exactly what the generated
    form asks, so both forms give the same queries.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for task, name in (("mcq", prefix), ("grounding", f"{prefix}_grounding")):
        chosen = [it for it in items if it.meta.get("task", "mcq") == task]
        if not chosen:
            continue
        letters = sorted({k for it in chosen for k in it.options}) or []
        letters = [x for x in string.ascii_uppercase if x in letters]
        for deg in rot.ROTATIONS:
            path = folder / f"{name}_rot{deg}.tsv"
            with path.open("w", encoding="utf-8", newline="") as fh:
                w = csv.writer(fh, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
                w.writerow(["index", "image", "question", *letters, "answer", "category"])
                for it in chosen:
                    question, options, gold = variant_text(it, deg, seed)
                    b64 = base64.b64encode(png_bytes(variant_image(it, deg, size))).decode("ascii")
                    w.writerow([it.id, b64, question, *(options.get(x, "") for x in letters), gold, it.category])
            written.append(path)
    return written
