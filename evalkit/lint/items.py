"""How lint sees an item: its views (what is asked), its place in the files, its kind, its images.

An item can be asked in more than one form: IF-Bench in English and in Chinese, a TDBench
official problem once per rotation file. Each form is a `View`, and the text, option and gold
checks run on every view, so a fault in the Chinese options or in the 270-degree file is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.core.types import ImageRef, Item

YES_NO_BENCHMARKS = ("rgb-th-bench", "pope")


@dataclass(frozen=True)
class View:
    """One form in which an item is asked."""

    item: str  # the item id
    label: str  # "" for the only form; "en" / "cn"; "rot90"
    question: str
    options: dict[str, str]
    answer: str
    cells: dict[str, str] | None  # every option cell as read, empty ones too (lenient loads only)
    file: str | None
    where: str | None
    dropped: tuple[str, ...] = ()  # option cells read as missing ("None": TDBench official mode), left out

    def name(self) -> str:
        return f"{self.item} ({self.label})" if self.label else self.item


def item_kind(bench: str, item: Item) -> str:
    """ "yesno", "grounding" (TDBench boxes) or "mcq"."""
    if bench in YES_NO_BENCHMARKS:
        return "yesno"
    if item.meta.get("task") == "grounding":
        return "grounding"
    return "mcq"


def _split(text: str) -> tuple[str | None, str | None]:
    """ "FILE: row 3 (index 7)" -> (FILE, "row 3 (index 7)")."""
    file, sep, rest = text.partition(": ")
    return (file, rest or None) if sep else (text or None, None)


def item_place(item: Item) -> tuple[str | None, str | None]:
    """(file, place in it) of an item, from what its benchmark's loader keeps in `meta`."""
    m = item.meta
    if "scene" in m and "block" in m:  # RGB-Th-Bench
        return f"{m['scene']}/questions.json", f"{m['scene']}, block {m['block']}"
    if isinstance(m.get("where"), str):  # IF-Bench: "FILE: dimension 'X' item k"
        return _split(m["where"])
    source = m.get("source")
    if isinstance(source, str) and ": line " in source:  # TDBench generated: "FILE: line n"
        return _split(source)
    place = (f"row {m['row']}" if m.get("row") else f"record {m['record']}" if m.get("record")
             else f"line {m['line']}" if m.get("line") else None)
    return (source if isinstance(source, str) else None), place


def views(item: Item) -> list[View]:
    """Every form of the item that a run asks (see the module docstring)."""
    m = item.meta
    file, where = item_place(item)
    variants = m.get("variants")
    if m.get("form") == "official" and isinstance(variants, dict) and variants:
        out = []
        for deg, v in sorted(variants.items()):
            vfile, vwhere = _split(v["where"]) if isinstance(v.get("where"), str) else (file, where)
            out.append(View(item.id, f"rot{deg}" if len(variants) > 1 else "", str(v.get("question") or ""),
                            dict(v.get("options") or {}), str(v.get("answer") or ""), v.get("lint_option_cells"),
                            vfile, vwhere, tuple(v.get("dropped_options") or ())))
        return out
    if "cn_question" in m and "cn_options" in m:  # IF-Bench: both languages are asked
        return [View(item.id, "en", item.question, dict(item.options), item.answer, None, file, where),
                View(item.id, "cn", str(m["cn_question"]), dict(m["cn_options"]), item.answer, None, file, where)]
    return [View(item.id, "", item.question, dict(item.options), item.answer, m.get("lint_option_cells"),
                 file, where)]


def image_key(ref: ImageRef) -> tuple[str, str | bytes]:
    """What makes two references the same image: the file path, or the inline data itself (Python
    keeps a string's hash once computed, so a megabyte of base64 is hashed once, not per use)."""
    return ref.kind, ref.value


def norm(text: Any) -> str:
    """Whitespace-normalised, case-folded text: how lint compares questions and options."""
    return " ".join(str(text or "").split()).casefold()
