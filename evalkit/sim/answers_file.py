"""Answers another harness recorded, for `evalkit sim --replay FILE`: evalkit re-scores any model's outputs.

Two shapes (docs/simulator.md):

* one JSON object, question id -> the raw answer text: `{"Source 1/Basement door/b00/q0": "No", ...}`;
* JSON Lines, one `{"id": ..., "answer": ...}` per line (other fields are ignored).

An id is evalkit's query id (`query_id` in records.jsonl): the item id for benchmarks that ask each
item once, the item id and the variant for those with variants (`12|r90`, `3|s1|en`). An item id of a
benchmark with variants is refused (which variant it answers cannot be known). A null answer is no
answer. evalkit's own records.jsonl is told apart by its fields (`query_id`, `response`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.types import Query

FLAG = "--replay"


def _first_object(path: Path) -> Any:
    """The first non-blank line as JSON, or None when it is not a whole JSON value on its own."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return None
    return None


def is_records(path: str | Path) -> bool:
    """True for evalkit's records.jsonl (its lines carry query_id and response), False for an answers file.
    ValueError naming the file when it cannot be read."""
    try:
        first = _first_object(Path(path))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{FLAG} {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    return isinstance(first, dict) and "query_id" in first and "response" in first


def _answer(value: Any, qid: str, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: the answer of '{qid}' is {type(value).__name__}, not text (or null for none)")


def read_answers(path: str | Path) -> dict[str, str]:
    """Question id -> raw answer from an answers file (null answers left out); ValueError naming the file
    and line for anything else."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{FLAG} {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    first = _first_object(path)
    if isinstance(first, dict) and "id" in first and "answer" in first:
        return _read_lines(text, path)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{FLAG} {path}: not JSON (line {e.lineno}: {e.msg}); expected an object id -> answer, "
                         'or JSON Lines {"id": ..., "answer": ...}') from None
    if not isinstance(whole, dict):
        raise ValueError(f"{FLAG} {path}: a JSON {type(whole).__name__}; expected an object id -> answer, or JSON "
                         'Lines {"id": ..., "answer": ...}')
    out = {str(k): _answer(v, str(k), f"{FLAG} {path}") for k, v in whole.items()}
    return {k: v for k, v in out.items() if v is not None}


def _read_lines(text: str, path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{FLAG} {path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(row, dict) or "id" not in row or "answer" not in row:
            raise ValueError(f'{where}: expected {{"id": ..., "answer": ...}}')
        qid = row["id"]
        if not isinstance(qid, str | int) or isinstance(qid, bool):
            raise ValueError(f"{where}: the id is {type(qid).__name__}, not text or a number")
        answer = _answer(row["answer"], str(qid), where)
        if answer is None:
            out.pop(str(qid), None)
        else:
            out[str(qid)] = answer  # a later line for the same id wins, as in a resumed run's records
    return out


@dataclass(frozen=True)
class Matched:
    """Query id -> answer, and what did not match: ids of no question, questions without an answer."""

    replies: dict[str, str]
    unknown: list[str]
    unanswered: int

    def note(self, bench: str, n_queries: int) -> str:
        said = f"replay: answers for {len(self.replies):,} of the {n_queries:,} questions of {bench}"
        if self.unanswered:
            said += f" ({self.unanswered:,} without one are not in the answer key)"
        if self.unknown:
            said += (f"; {len(self.unknown):,} ids match no question loaded (e.g. "
                     f"{', '.join(repr(i) for i in self.unknown[:3])})")
        return said


def match_answers(queries: Sequence[Query], answers: Mapping[str, str], bench: str) -> Matched:
    """Each answer's query: by query id, or by item id where the item is asked once. ValueError for an item
    id of an item asked in several variants, or when no id matches at all (the ids are of another scheme)."""
    by_item: dict[str, list[str]] = {}
    for q in queries:
        by_item.setdefault(q.item_id, []).append(q.id)
    ids = {q.id for q in queries}
    replies: dict[str, str] = {}
    unknown: list[str] = []
    for key, answer in answers.items():
        if key in ids:
            replies[key] = answer
        elif len(by_item.get(key, ())) == 1:
            replies[by_item[key][0]] = answer
        elif key in by_item:
            shown = ", ".join(by_item[key][:4]) + (", …" if len(by_item[key]) > 4 else "")
            raise ValueError(f"{FLAG}: '{key}' is an item of {bench} asked as {len(by_item[key])} queries ({shown}): "
                             "key each answer by its query id")
        else:
            unknown.append(key)
    if not answers:
        raise ValueError(f"{FLAG}: the file holds no answers")
    if not replies:
        raise ValueError(f"{FLAG}: none of the {len(answers):,} ids is a question of {bench} (e.g. "
                         f"{', '.join(repr(k) for k in list(answers)[:3])}; its ids look like "
                         f"{', '.join(repr(q.id) for q in queries[:2])}): key answers by evalkit's query id")
    return Matched(replies, unknown, sum(1 for q in queries if q.id not in replies))
