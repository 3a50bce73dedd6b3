"""What the RGB-Th-Bench test files share: the sample release bundled with evalkit, the side real photos
are sent at (keeps the runs quick; the answer key's fingerprints survive the resize), and the published
outputs of other harnesses matched to evalkit's queries (replay of recorded third-party answers)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Query

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "rgb-th-bench"
MAX_SIDE = 256


def recorded_replies(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """(scene id, skill, question) -> the raw replies in file order, from the mirror's result rows
    (`file` like `Source 1\\\\Basement door\\\\questions.json`)."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for row in rows:
        parts = [p for p in re.split(r"[\\/]", str(row["file"])) if p]
        scene = "/".join(parts[-3:-1])
        key = (scene, str(row["skill"]).strip(), " ".join(str(row["question"]).split()))
        out.setdefault(key, []).append(str(row.get("vlm_response_raw") or ""))
    return out


def replay_replies(queries: Sequence[Query], replies: Mapping[tuple[str, str, str], list[str]]) -> dict[str, str]:
    """Query id -> recorded reply, matching repeated questions in order; a missing one is an error."""
    used: dict[tuple[str, str, str], int] = {}
    out = {}
    for q in queries:
        key = (str(q.meta["scene"]), q.category, " ".join(str(q.meta["question"]).split()))
        k = used.get(key, 0)
        found = replies.get(key, [])
        if k >= len(found):
            raise EvalkitError(f"no recorded answer for {q.id} ({key[1]}: {key[2]!r})")
        out[q.id] = found[k]
        used[key] = k + 1
    return out
