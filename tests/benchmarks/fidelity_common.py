"""What the golden fidelity tests share: the verdict tables (tests/fixtures/fidelity/) and how a row
is compared with evalkit's reading of it (test_fidelity.py: unit; test_fidelity_e2e.py: through runs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from synthetic_data import FIXTURES, SHARED_DATA

from evalkit.core.types import Query

FIDELITY = FIXTURES / "fidelity"
GEN = FIXTURES / "gen"
OFFICIAL = SHARED_DATA.parent / "official"
LETTERS = ("A", "B", "C", "D")
TABLES = ("ifbench_rule", "ifbench_extractor", "tdbench_mc", "tdbench_grounding", "mme", "rgbth")


def rows(name: str) -> list[dict[str, Any]]:
    return json.loads((FIDELITY / f"{name}.json").read_text(encoding="utf-8"))["rows"]


def agree(name: str, table: Iterable[dict[str, Any]], official: Callable[[dict[str, Any]], Any],
          evalkit: Callable[[dict[str, Any]], Any]) -> None:
    """Every row's official and evalkit views equal; else fail listing each disagreeing row."""
    table = list(table)
    bad = []
    for row in table:
        want, got = official(row), evalkit(row)
        if want != got:
            reply = f" reply={row['reply']!r}" if "reply" in row else ""
            bad.append(f"  {row['id']}: answer={row['answer']!r}{reply} gold={row['gold']!r}\n"
                       f"      official={want}\n      evalkit ={got}")
    if bad:
        head = f"{name}: {len(bad)} of {len(table)} rows disagree with the official code:\n"
        pytest.fail(head + "\n".join(bad), pytrace=False)


def query(row: dict[str, Any], options: dict[str, str] | None = None, **meta: Any) -> Query:
    return Query(id=row["id"], item_id=row["id"], base_id=row["id"], variant={}, messages=(),
                 gold=row["gold"], options=dict(options if options is not None else row.get("options") or {}),
                 meta={"question": "Where is the object?", **meta})


def letter(value: str | None) -> str | None:
    """An IF-Bench reading as the official code scores it: A-D, or none ("", "F", an unread answer)."""
    return value if value in LETTERS else None
