"""The simulated model's answer key: what it "knows", keyed by what a server can see.

A server only sees the request body, so an entry is found by the prompt text and the
fingerprints of the images. The same question text may come with many images (a
rotation benchmark asks one question of every picture), so among entries with the same
text the one with the nearest image fingerprints wins.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.core import fingerprint
from evalkit.core.types import ImagePart, Query

FORMAT = "evalkit-answer-key/1"
_FP_BYTES = fingerprint.SIDE * fingerprint.SIDE


def normalise_text(text: str) -> str:
    """Collapse whitespace so trivial formatting differences do not break a lookup."""
    return " ".join(text.split())


@dataclass
class AnswerEntry:
    """One request the simulated model knows. reply is set in replay mode (returned verbatim)."""

    base_id: str
    text: str
    images: list[str]
    answer: str
    options: dict[str, str] = field(default_factory=dict)
    reply: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["reply"] is None:
            del d["reply"]
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> AnswerEntry:
        return AnswerEntry(
            base_id=str(d["base_id"]),
            text=str(d["text"]),
            images=[str(x) for x in d.get("images") or []],
            answer=str(d.get("answer") or ""),
            options={str(k): str(v) for k, v in (d.get("options") or {}).items()},
            reply=None if d.get("reply") is None else str(d["reply"]),
        )


def _decode_fp(fp: str) -> bytes | None:
    try:
        raw = bytes.fromhex(fp)
    except ValueError:
        return None
    return raw if len(raw) == _FP_BYTES else None


class AnswerKey:
    """Entries indexed by normalised text; lookups are O(1) in the key size plus one group scan."""

    def __init__(self, entries: Iterable[AnswerEntry] = ()) -> None:
        self.entries: list[AnswerEntry] = []
        self._index: dict[str, list[int]] = {}
        # (normalised text, image count) -> (entry indices, uint8 matrix) built on first use
        self._groups: dict[tuple[str, int], tuple[list[int], np.ndarray | None]] = {}
        for e in entries:
            self.add(e)

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: AnswerEntry) -> None:
        """Append one entry (invalidating the cached group it belongs to)."""
        norm = normalise_text(entry.text)
        self._index.setdefault(norm, []).append(len(self.entries))
        self.entries.append(entry)
        self._groups.pop((norm, len(entry.images)), None)

    # -- lookup --------------------------------------------------------------------------

    def _group(self, norm: str, n_images: int) -> tuple[list[int], np.ndarray | None]:
        """Candidates with this text and image count, plus their fingerprints as one matrix."""
        key = (norm, n_images)
        cached = self._groups.get(key)
        if cached is not None:
            return cached
        idx = [i for i in self._index.get(norm, ()) if len(self.entries[i].images) == n_images]
        mat: np.ndarray | None = None
        if len(idx) > 1 and n_images > 0:
            rows = []
            for i in idx:
                decoded = [_decode_fp(fp) for fp in self.entries[i].images]
                if any(d is None for d in decoded):
                    rows = []
                    break
                rows.append(b"".join(d for d in decoded if d is not None))
            if rows:
                mat = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(idx), -1).astype(np.int16)
        self._groups[key] = (idx, mat)
        return idx, mat

    def lookup(self, text: str, fps: list[str]) -> AnswerEntry | None:
        """The entry with this text whose images are nearest to fps (ties: the first added)."""
        idx, mat = self._group(normalise_text(text), len(fps))
        if not idx:
            return None
        if len(idx) == 1 or not fps:
            return self.entries[idx[0]]
        decoded = [_decode_fp(fp) for fp in fps]
        if mat is not None and all(d is not None for d in decoded):
            query = np.frombuffer(b"".join(d for d in decoded if d is not None), dtype=np.uint8)
            dists = np.abs(mat - query.astype(np.int16)).sum(axis=1)
            return self.entries[idx[int(np.argmin(dists))]]
        best = min(
            idx,
            key=lambda i: sum(
                fingerprint.distance(a, b) for a, b in zip(self.entries[i].images, fps, strict=True)
            ),
        )
        return self.entries[best]

    # -- persistence ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "entries": [e.to_dict() for e in self.entries]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AnswerKey:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not an evalkit answer key (expected format {FORMAT!r})")
        return cls(AnswerEntry.from_dict(e) for e in data.get("entries") or [])

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> AnswerKey:
        with open(path, encoding="utf-8") as f:
            return cls.from_json(json.load(f))

    @classmethod
    def from_records(cls, path: str | Path) -> AnswerKey:
        """Replay key from a run's records.jsonl: each answered request gets its recorded reply.

        Records without a response (errors) are skipped; when a request was recorded more than
        once (a resumed run) the last response wins.
        """
        chosen: dict[tuple[str, tuple[str, ...]], AnswerEntry] = {}
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from exc
                if rec.get("response") is None or rec.get("error"):
                    continue
                entry = AnswerEntry(
                    base_id=str(rec.get("base_id") or rec.get("item_id") or ""),
                    text=str(rec.get("prompt") or ""),
                    images=[str(x) for x in rec.get("image_fps") or []],
                    answer=str(rec.get("gold") or ""),
                    options={str(k): str(v) for k, v in (rec.get("options") or {}).items()},
                    reply=str(rec["response"]),
                )
                chosen[(normalise_text(entry.text), tuple(entry.images))] = entry
        return cls(chosen.values())

    def merged(self, other: AnswerKey) -> AnswerKey:
        """A new key with this key's entries first (they win ties), then other's."""
        return AnswerKey([*self.entries, *other.entries])


def build_answer_key(queries: Iterable[Query], fingerprint_of: Callable[[ImagePart], str]) -> AnswerKey:
    """Answer key for a dataset's queries; identical requests (same text and images) appear once."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    key = AnswerKey()
    for q in queries:
        text = q.prompt_text()
        fps = [fingerprint_of(p) for p in q.image_parts()]
        ident = (normalise_text(text), tuple(fps))
        if ident in seen:
            continue
        seen.add(ident)
        key.add(AnswerEntry(base_id=q.base_id, text=text, images=fps, answer=q.gold, options=dict(q.options)))
    return key
