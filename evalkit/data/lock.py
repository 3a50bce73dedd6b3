"""The data lock (`evalkit.lock`, JSON): what each source resolved to — commit and every file's
sha256 — so the same command elsewhere or later reads the same bytes, or stops and says which differ.

Written by `evalkit data lock`; read by `run`, `data pull` and `data verify` from the current folder
(or `--lock FILE`). Keyed by the source's uri without its revision, plus the endpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.text import data_json
from evalkit.data.source import DataSource

LOCK_NAME = "evalkit.lock"
LOCK_VERSION = 1


@dataclass(frozen=True)
class Lock:
    path: Path
    sources: Mapping[str, Mapping[str, Any]]  # key -> {"kind", "uri", "endpoint", "revision", "commit", "files"}

    def pinned(self, key: str) -> DataSource | None:
        entry = self.sources.get(key)
        return DataSource.from_dict(entry) if entry is not None else None


def lock_key(kind: str, base_uri: str, endpoint: str | None) -> str:
    """One entry per repository and endpoint: a mirror's lock entry is not huggingface.co's."""
    return f"{kind} {base_uri} {endpoint or ''}".strip()


def read_lock(path: Path) -> Lock | None:
    """The lock at `path`, None when there is none; a damaged one is one line naming it."""
    if not path.is_file():
        return None
    try:
        raw = data_json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or not isinstance(raw.get("sources"), dict):
            raise ValueError("no 'sources' object")
        return Lock(path, raw["sources"])
    except (OSError, ValueError) as e:
        raise EvalkitError(f"{path}: not an evalkit lock ({e}); fix or delete it") from None


def write_lock(path: Path, entries: Mapping[str, DataSource], *, keep: Lock | None = None) -> None:
    """Write (or update, keeping other entries) the lock, atomically."""
    sources: dict[str, Any] = dict(keep.sources) if keep is not None else {}
    sources.update({k: v.to_dict() for k, v in entries.items()})
    body = {"evalkit_lock": LOCK_VERSION, "sources": dict(sorted(sources.items()))}
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def check_against(lock: Lock, key: str, found: Mapping[str, str]) -> None:
    """Every file the lock pins and this read holds must have the locked sha256."""
    pinned = lock.pinned(key)
    if pinned is None:
        return
    for path, sha in sorted(found.items()):
        want = pinned.files.get(path)
        if want is not None and want != sha:
            raise EvalkitError(f"{path}: sha256 {sha} differs from {lock.path}'s {want} ({pinned.uri}); "
                               f"the data changed since it was locked: run `evalkit data lock` again to accept it")
