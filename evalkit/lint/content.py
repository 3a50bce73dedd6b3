"""Text, option and gold checks (pure): what a run would ask, read for faults no score shows.

Each check takes an item's views (lint.items) and returns findings; nothing here reads a file.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from evalkit.core.findings import Finding
from evalkit.core.types import Item
from evalkit.lint.items import View, image_key, item_kind, item_place, norm, views
from evalkit.lint.model import finding


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def view_findings(view: View, kind: str, *, duplicate_options: bool = True) -> list[Finding]:
    """Empty question, missing/empty/duplicate options and a gold outside the options (or not yes/no)."""
    out: list[Finding] = []
    at = {"file": view.file, "items": (view.item,), "where": view.where}
    label = f" ({view.label})" if view.label else ""
    if not view.question.strip():
        out.append(finding("error", "empty-question", f"the question{label} has no text", **at))
    if kind == "yesno":
        if view.answer not in ("Yes", "No"):
            out.append(finding("error", "gold-not-yes-no", f"the gold answer {view.answer!r} is neither Yes nor "
                                                           "No: no reply can be right", **at))
        return out
    if kind == "grounding":
        return out  # a box, checked by the loader
    if not view.options:
        out.append(finding("error", "no-options", f"the item{label} has no options", **at))
        return out
    empty = [k for k, v in view.options.items() if not v.strip()]
    if view.cells:  # a gap in the option cells: an empty one before a filled one
        cells = list(view.cells.items())
        last = max((i for i, (_, v) in enumerate(cells) if v.strip()), default=-1)
        empty += [k for i, (k, v) in enumerate(cells) if i < last and not v.strip() and k not in empty]
    if empty:
        out.append(finding("warning", "empty-option", f"option{'s' if len(empty) > 1 else ''} {', '.join(empty)}"
                                                      f"{label} {'are' if len(empty) > 1 else 'is'} empty", **at))
    if view.dropped:
        gold = view.answer in view.dropped
        out.append(finding("error" if gold else "warning", "option-read-as-missing",
                           f"option{'s' if len(view.dropped) > 1 else ''} {', '.join(view.dropped)}{label} "
                           f"{'are' if len(view.dropped) > 1 else 'is'} read as missing ('None', 'nan' or 'NaN' in the "
                           "cell, as VLMEvalKit's pandas reads it) and left out of the prompt"
                           + (f"; {view.answer} is the gold answer: no reply can be right" if gold else ""), **at))
    if view.answer not in view.options and view.answer not in view.dropped:
        shown = ", ".join(view.options)
        out.append(finding("error", "gold-not-in-options", f"the gold answer {view.answer!r}{label} is not among "
                                                           f"the options {shown}: no reply can be right", **at))
    if duplicate_options:
        out += duplicate_option_findings(view)
    return out


def duplicate_option_findings(view: View) -> list[Finding]:
    """Options with the same text: an error when the gold's text is one of them (the same answer is
    right under one letter and wrong under another), else a warning (fewer real choices)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for letter, text in view.options.items():
        if text.strip():
            groups[norm(text)].append(letter)
    out = []
    label = f" ({view.label})" if view.label else ""
    for letters in groups.values():
        if len(letters) < 2:
            continue
        gold = view.answer in letters
        text = _quote(view.options[letters[0]], 40)
        why = ("the gold answer's text appears twice, so the same reply is right under one letter and wrong "
               "under the other") if gold else "fewer real choices than shown"
        out.append(finding("error" if gold else "warning", "duplicate-option",
                           f"options {', '.join(letters)}{label} have the same text {text}: {why}",
                           file=view.file, items=(view.item,), where=view.where))
    return out


def option_count_findings(bench: str, items: Sequence[Item], expected: dict[str, tuple[int, ...]]) -> list[Finding]:
    """Items whose option count is not the protocol's (`expected[bench]`); generic `mcq` has no
    protocol, so an item off the set's most common count is info there."""
    mcq = [it for it in items if item_kind(bench, it) == "mcq"]
    if not mcq:
        return []
    allowed = expected.get(bench)
    severity = "warning"
    if allowed is None:
        common = Counter(len(it.options) for it in mcq).most_common(1)[0][0]
        allowed, severity = (common,), "info"
    out = []
    for it in mcq:
        for view in views(it):
            n = len(view.options)
            if n and n not in allowed:
                want = " or ".join(map(str, allowed))
                label = f" ({view.label})" if view.label else ""
                basis = "the protocol's" if severity == "warning" else "the set's usual"
                out.append(finding(severity, "option-count", f"{n} options{label}, not {basis} {want}",
                                   file=view.file, items=(view.item,), where=view.where))
    return out


def duplicate_questions(bench: str, items: Iterable[Item], *, per_category: bool = False) -> list[Finding]:
    """The same question (whitespace-normalised) on the same image(s) asked more than once: an
    error when the copies' gold answers differ (no model can get all of them right), a warning
    when they agree (the question weighs twice). Multiple-choice copies must also offer the same
    option texts (their golds are compared by text, so shuffled copies still match); a hint is
    part of the question. `per_category`: copies count only within a category (POPE's splits share
    their positive questions by design and are scored apart)."""
    groups: dict[tuple, list[Item]] = defaultdict(list)
    for it in items:
        if not it.question.strip():
            continue
        kind = item_kind(bench, it)
        option_set = tuple(sorted(norm(v) for v in it.options.values())) if kind == "mcq" else ()
        key = (norm(it.question), norm(it.meta.get("hint")), tuple(image_key(r) for r in it.images), option_set,
               kind, it.category if per_category else None)
        groups[key].append(it)
    out = []
    for copies in groups.values():
        if len(copies) < 2:
            continue
        golds = [norm(it.options.get(it.answer, it.answer)) if it.options else norm(it.answer) for it in copies]
        shown = [it.options.get(it.answer, it.answer) if it.options else it.answer for it in copies]
        contradictory = len(set(golds)) > 1
        file, _ = item_place(copies[0])
        places = list(dict.fromkeys(p for p in (item_place(it)[1] for it in copies) if p))
        if len(places) > 1 and all(p.startswith("row ") for p in places):
            places = ["rows " + ", ".join(p.removeprefix("row ") for p in places)]
        if contradictory:
            why = f"with different gold answers ({' / '.join(map(str, shown))}): no model can get every copy right"
        else:
            why = f"with the same gold answer ({shown[0]}): it weighs {len(copies)} times"
        out.append(finding("error" if contradictory else "warning", "duplicate-question",
                           f"the question {_quote(copies[0].question)} is asked {len(copies)} times on the same "
                           f"image(s) {why}", file=file, items=[it.id for it in copies],
                           where="; ".join(places) or None))
    return out
