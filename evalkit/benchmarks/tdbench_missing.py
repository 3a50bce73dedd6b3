"""TDBench official mode: option cells that VLMEvalKit's pipeline reads as missing, said once.

VLMEvalKit reads a TSV with pandas' defaults (`pd.read_csv(f, sep='\\t')`), and pandas (2.0 and later)
reads a cell holding "None", "nan" or "NaN" as a missing value. Its prompt builder and its scorer both
skip missing option cells (`not pd.isna(line[cand])`), so such an option is neither shown nor readable
in a reply. When it is the gold option, the question stays in the set and no reply can be right (the
reply is read against the other options only, or as "Z"): the rotation is scored wrong. Checked by
running VLMEvalKit@3ba9220a's `build_prompt` and `mcq_vanilla_eval` on such a file (pandas 2.3.3):
the prompt lists the other options, and a reply naming the gold scores 0 ("Failed in Prefetch").

evalkit reads these cells as missing too (readers/vlmeval_tsv.py `clean_cell`), so the prompts were
already VLMEvalKit's; official mode now also keeps the question whose gold cell was so read, as
VLMEvalKit does, where robust mode refuses the file (no reply can be right). Either way the run says
how many options were dropped: one line at the start, a finding in summary.json and report.md, and a
lint finding per cell (lint/content.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evalkit.core.findings import Finding
from evalkit.core.types import Item

KIND = "option-read-as-missing"  # the lint finding kind (lint/model.py) and the run's finding


@dataclass(frozen=True)
class DroppedOption:
    """One option cell read as missing: the problem, the rotation file it is in, its letter."""

    item: str
    rot: int
    letter: str
    gold: bool  # it was the gold option: no reply to this rotation can be right

    @property
    def query_id(self) -> str:
        return f"{self.item}|r{self.rot}"


def dropped_options(items: Iterable[Item]) -> list[DroppedOption]:
    """Every option cell of these items that was read as missing (the loader's `dropped_options`)."""
    out = []
    for item in items:
        for deg, v in sorted((item.meta.get("variants") or {}).items()):
            for letter in v.get("dropped_options") or ():
                out.append(DroppedOption(item.id, int(deg), letter, letter == v.get("answer")))
    return out


def _counts(dropped: Sequence[DroppedOption]) -> str:
    golds = sum(d.gold for d in dropped)
    what = (f"{len(dropped)} option cell{'s' if len(dropped) != 1 else ''} holding 'None' (or 'nan', 'NaN') "
            f"{'were' if len(dropped) != 1 else 'was'} read as missing, as VLMEvalKit's pipeline (pandas) reads "
            f"{'them' if len(dropped) != 1 else 'it'}, and left out of the prompt")
    if not golds:
        return what
    return (what + f"; {golds} of them {'are' if golds != 1 else 'is'} the gold answer, so "
            f"{'those' if golds != 1 else 'that'} {golds} question{'s' if golds != 1 else ''} "
            "can only be scored wrong, as there")


def dropped_note(dropped: Sequence[DroppedOption]) -> str | None:
    """The one line a run says at its start, or None."""
    return f"tdbench: {_counts(dropped)} (--mode official; --mode robust refuses such a gold)" if dropped else None


def dropped_finding(dropped: Sequence[DroppedOption], query_ids: Iterable[str]) -> Finding | None:
    """The run's finding about the dropped options of the queries it scored (error when a gold was one)."""
    asked = set(query_ids)
    mine = [d for d in dropped if d.query_id in asked]
    if not mine:
        return None
    return Finding("error" if any(d.gold for d in mine) else "warning", KIND, _counts(mine),
                   items=tuple(dict.fromkeys(d.item for d in mine)),
                   where=", ".join(f"{d.item} rot{d.rot} option {d.letter}" for d in mine[:10])
                   + (", …" if len(mine) > 10 else ""))
