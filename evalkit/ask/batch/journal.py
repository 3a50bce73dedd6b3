"""The run directory's record of its provider batches (`batches.jsonl`), written before each step.

Append-only events, each flushed to disk before evalkit acts on it:

- `intent`    — the tag and custom ids of a batch about to be created (written *before* the provider
                is asked, so a kill between the provider accepting it and evalkit recording it is
                reconciled by finding the tag, never by submitting again);
- `submitted` — the provider's batch id for a tag;
- `state`     — the provider's state and counts, as last seen;
- `lost`      — an intent the provider never received, or a batch it no longer knows: its lines are
                free to be submitted again.

`replay` folds the events into one `JournalBatch` per tag. Damaged lines (a torn write) are skipped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

JOURNAL = "batches.jsonl"


@dataclass(frozen=True)
class JournalBatch:
    tag: str
    provider: str
    custom_ids: tuple[str, ...]
    batch_id: str | None = None
    state: str = "intent"  # intent, running, ended, failed, expired, cancelled, lost
    provider_state: str = ""
    done: int = 0
    failed: int = 0
    since: float = 0.0  # when the intent was written (epoch s): the provider's batch is no older

    @property
    def open(self) -> bool:
        """Its lines may still get answers from it (so they must not be submitted again)."""
        return self.state in ("intent", "running", "ended")

    def to_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, "provider": self.provider, "batch_id": self.batch_id, "state": self.state,
                "provider_state": self.provider_state, "requests": len(self.custom_ids), "done": self.done,
                "failed": self.failed}


def replay(events: Iterable[dict[str, Any]]) -> dict[str, JournalBatch]:
    """The batches as the events leave them, by tag (pure: the journal's meaning in one place)."""
    out: dict[str, JournalBatch] = {}
    by_id: dict[str, str] = {}
    for e in events:
        kind, tag = e.get("event"), e.get("tag")
        if kind == "intent" and isinstance(tag, str):
            out[tag] = JournalBatch(tag, str(e.get("provider", "")), tuple(e.get("custom_ids") or ()),
                                    since=float(e.get("at") or 0.0))
        elif kind == "submitted" and tag in out and isinstance(e.get("batch_id"), str):
            out[tag] = replace(out[tag], batch_id=e["batch_id"], state="running")
            by_id[e["batch_id"]] = tag
        elif kind == "state" and e.get("batch_id") in by_id:
            t = by_id[e["batch_id"]]
            out[t] = replace(out[t], state=str(e.get("state")), provider_state=str(e.get("provider_state", "")),
                             done=int(e.get("done") or 0), failed=int(e.get("failed") or 0))
        elif kind == "lost" and tag in out:
            out[tag] = replace(out[tag], state="lost")
    return out


def read_events(path: Path) -> list[dict[str, Any]]:
    """The journal's events; a damaged line (torn write, stray bytes) is skipped."""
    if not path.is_file():
        return []
    events = []
    for raw in path.read_bytes().splitlines():
        try:
            e = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(e, dict):
            events.append(e)
    return events


class BatchJournal:
    """The journal of one run directory: read once, then appended to (each event on disk before
    the step it announces). The events are few (a handful per batch), so they are kept and re-folded."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / JOURNAL
        self._events = read_events(self.path)
        self.batches = replay(self._events)

    def _append(self, event: dict[str, Any]) -> None:
        event = {**event, "at": round(time.time(), 3)}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(event, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._events.append(event)
        self.batches = replay(self._events)

    def intent(self, tag: str, provider: str, custom_ids: Iterable[str]) -> None:
        self._append({"event": "intent", "tag": tag, "provider": provider, "custom_ids": list(custom_ids)})

    def submitted(self, tag: str, batch_id: str) -> None:
        self._append({"event": "submitted", "tag": tag, "batch_id": batch_id})

    def state(self, batch_id: str, state: str, *, provider_state: str = "", done: int = 0, failed: int = 0) -> None:
        tag = self.tag_of(batch_id)
        if tag is None:
            return
        b = self.batches[tag]
        if (b.state, b.provider_state, b.done, b.failed) == (state, provider_state, done, failed):
            return  # nothing new: the journal grows only when something changed
        self._append({"event": "state", "batch_id": batch_id, "state": state, "provider_state": provider_state,
                      "done": done, "failed": failed})

    def lost(self, tag: str) -> None:
        self._append({"event": "lost", "tag": tag})

    def tag_of(self, batch_id: str) -> str | None:
        return next((t for t, b in self.batches.items() if b.batch_id == batch_id), None)
