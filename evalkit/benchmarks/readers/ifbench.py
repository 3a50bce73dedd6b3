"""Reading IF-Bench's question file (both official JSON forms) and finding its images.

Every bad entry is an EvalkitError naming the file and the entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.core.errors import EvalkitError

LANGS = ("en", "cn")
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff")


def entries(data: Any, path: Path) -> list[tuple[str, str | None, Any]]:
    """(where, dimension key or None, raw item) for both official forms, in file order."""
    if isinstance(data, Mapping):
        out = []
        for dim, items in data.items():
            if not isinstance(items, list):
                raise EvalkitError(f"{path}: dimension {dim!r}: expected a list of items")
            out += [(f"{path}: dimension {dim!r} item {k}", str(dim), obj) for k, obj in enumerate(items, 1)]
        return out
    if isinstance(data, list):
        return [(f"{path}: item {k}", None, obj) for k, obj in enumerate(data, 1)]
    raise EvalkitError(f"{path}: expected an object {{dimension: [items]}} or a list of items")


def _options(where: str, raw: Any, name: str) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not raw:
        raise EvalkitError(f"{where}: '{name}' must be an object of options")
    opts = {str(k).strip(): v for k, v in raw.items()}
    if any(not isinstance(v, str) for v in opts.values()):
        raise EvalkitError(f"{where}: '{name}' values must be strings")
    return opts


def parse_item(where: str, dim_key: str | None, obj: Any, sink: Sink = STRICT) -> dict[str, Any]:
    """One raw item checked and flattened; `pos_info` and `original_answer` are ignored. Lenient
    (`sink`): a gold outside the options is kept as read, for lint's checks to name."""
    if not isinstance(obj, Mapping):
        raise EvalkitError(f"{where}: expected an object")
    q = obj.get("question")
    if not isinstance(q, Mapping):
        raise EvalkitError(f"{where}: no 'question' object")
    image = obj.get("dst_thermal_path")
    if not isinstance(image, str) or not image.strip():
        raise EvalkitError(f"{where}: no 'dst_thermal_path'")
    dimension = str(q.get("dimension") or dim_key or "").strip()
    if not dimension:
        raise EvalkitError(f"{where}: no 'dimension'")
    out: dict[str, Any] = {"image": image.strip(), "dimension": dimension, "dataset": str(obj.get("dataset") or "")}
    for lang in LANGS:
        text = q.get(f"{lang}_question")
        if not isinstance(text, str) or not text.strip():
            raise EvalkitError(f"{where}: no '{lang}_question'")
        out[f"{lang}_question"] = text
        out[f"{lang}_options"] = _options(where, q.get(f"{lang}_options"), f"{lang}_options")
    if list(out["en_options"]) != list(out["cn_options"]):
        raise EvalkitError(f"{where}: en_options and cn_options have different letters")
    answer = str(q.get("answer") or "").strip().upper()
    if answer not in out["en_options"]:
        sink.content(f"{where}: answer {q.get('answer')!r} is not among the options {', '.join(out['en_options'])}")
    out["answer"] = answer
    return out


def default_image_dir(data: Path, name: str) -> Path:
    """`<data folder>/<name>` when it exists (the official layout), else the data folder."""
    folder = data.parent / name
    return folder if folder.is_dir() else data.parent


def find_image(folder: Path, name: str) -> Path | None:
    """`folder/name`, else a file with the same stem and an image extension (translations are often PNG)."""
    exact = folder / name
    if exact.is_file():
        return exact
    stem = Path(name).stem
    for ext in IMAGE_EXTS:
        candidate = (folder / name).with_name(stem + ext)
        if candidate.is_file():
            return candidate
    return None


def dimension_of(dim_key: str | None, obj: Any) -> str:
    """An entry's dimension as parse_item reads it, "" when it has none (for the ids of bad entries)."""
    q = obj.get("question") if isinstance(obj, Mapping) else None
    return str((q.get("dimension") if isinstance(q, Mapping) else None) or dim_key or "").strip()


def item_ids(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Stable ids: dimension column name + index within the dimension, in file order.

    The same question and options recur on different images, so ids never come from text.
    """
    from evalkit.metrics.ifbench import short_name

    seen: dict[str, int] = {}
    out = []
    for row in rows:
        code = short_name(row["dimension"]).replace(" ", "_")
        seen[code] = seen.get(code, 0) + 1
        out.append(f"{code}-{seen[code]:03d}")
    return out
