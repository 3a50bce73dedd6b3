"""The run directory: config.json, records.jsonl (append-only while asking), summary.json.

records.jsonl is appended and flushed one line per finished query, so a run killed at any
moment loses at most the line being written; loading tolerates that torn last line.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from evalkit.core.errors import EvalkitError
from evalkit.core.files import write_json_atomic
from evalkit.core.types import Record

RECORDS = "records.jsonl"
CONFIG = "config.json"
SUMMARY = "summary.json"


def settings_hash(settings: dict[str, Any]) -> str:
    """Short stable hash of the output-affecting settings: the default run directory's suffix."""
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def default_run_dir(bench: str, model_label: str, settings: dict[str, Any], root: Path = Path("runs")) -> Path:
    safe_model = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_label)
    return root / f"{bench}-{safe_model}-{settings_hash(settings)}"


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._fh: TextIO | None = None

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS

    # ---- config ------------------------------------------------------------------------
    def bind(self, identity: dict[str, Any], config: dict[str, Any],
             legacy: dict[str, Any] | None = None) -> str | None:
        """Create the directory, or check an existing one holds the same run (same identity).

        A directory written by 0.1.0 holds its identity in the old form: it is the same run when that
        equals `legacy` (0.1.0's identity for this command), and its config is then rewritten in
        today's form. Returns a one-line note when that happened."""
        self.path.mkdir(parents=True, exist_ok=True)
        cfg_path = self.path / CONFIG
        note = None
        if cfg_path.exists():
            try:
                old = json.loads(cfg_path.read_text(encoding="utf-8"))
            except ValueError as e:
                raise EvalkitError(f"{cfg_path}: unreadable ({e}); remove it or choose another --out") from e
            old_identity = old.get("identity", {})
            expected = legacy if legacy is not None and "identity_version" not in old_identity else identity
            if old_identity != expected:
                diff = sorted(k for k in set(old_identity) | set(expected) if old_identity.get(k) != expected.get(k))
                raise EvalkitError(f"run directory {self.path} holds a run with different settings "
                                   f"({', '.join(diff)}); choose another --out")
            if expected is legacy:
                note = f"{self.path}: a 0.1.0 run directory; its config.json is rewritten in the 0.2 form"
        write_json_atomic(cfg_path, {"identity": identity, "config": config})
        return note

    def write_config(self, identity: dict[str, Any], config: dict[str, Any]) -> None:
        write_json_atomic(self.path / CONFIG, {"identity": identity, "config": config})

    def read_config(self) -> dict[str, Any]:
        cfg_path = self.path / CONFIG
        if not cfg_path.exists():
            raise EvalkitError(f"{self.path} is not an evalkit run directory (no {CONFIG})")
        return json.loads(cfg_path.read_text(encoding="utf-8"))

    # ---- records -----------------------------------------------------------------------
    def load_records(self) -> dict[str, Record]:
        """Last record per query id; a torn final line (killed mid-write) is ignored."""
        out: dict[str, Record] = {}
        if not self.records_path.exists():
            return out
        with self.records_path.open(encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # torn write
                try:
                    rec = Record.from_dict(json.loads(line))
                except (ValueError, TypeError):
                    continue
                out[rec.query_id] = rec
        return out

    def rewrite_records(self, records: Iterable[Record]) -> None:
        """Atomically replace records.jsonl (compaction on resume, final parsed/judged fields)."""
        self.close()
        tmp = self.records_path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec.to_dict(), ensure_ascii=False) + "\n")
        os.replace(tmp, self.records_path)

    def append(self, record: Record) -> None:
        if self._fh is None:
            self._fh = self.records_path.open("a", encoding="utf-8")
        self._fh.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.path / SUMMARY, summary)

    def read_summary(self) -> dict[str, Any]:
        return json.loads((self.path / SUMMARY).read_text(encoding="utf-8"))
