"""The sha256 of each file evalkit downloaded from an endpoint whose listing gives no hash (a mirror or
proxy that does not pass the Hub's blob ids on): recorded at the first download, beside the files in
the Hub cache (`<repository folder>/evalkit-sha256/<commit>.json`), and every later read of the file is
checked against it. What this cannot prove is the first download itself: its bytes are the ones the
endpoint served that day (as for the registry's `first-download` sources)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from evalkit.data.source import COMMIT

FOLDER = "evalkit-sha256"


def pins_file(repo_folder: Path, commit: str) -> Path:
    if not COMMIT.fullmatch(commit):  # a commit id names a file here: never a path of its own
        raise ValueError(f"not a commit id: {commit!r}")
    return repo_folder / FOLDER / f"{commit}.json"


def read_pins(repo_folder: Path, commit: str) -> dict[str, str]:
    """path -> sha256 recorded for this commit ({} when none, or the record is unreadable)."""
    try:
        raw = json.loads(pins_file(repo_folder, commit).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def add_pins(repo_folder: Path, commit: str, new: Mapping[str, str]) -> None:
    """Record these files' sha256s (the earlier ones of this commit kept), written whole then renamed."""
    if not new:
        return
    path = pins_file(repo_folder, commit)
    pins = {**read_pins(repo_folder, commit), **new}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(dict(sorted(pins.items())), indent=1), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def unlisted_note(endpoint: str, where: str, unlisted: Iterable[str]) -> str | None:
    """The one line a source read from a listing without hashes gets (None when every file had one)."""
    n = len(set(unlisted))
    if not n:
        return None
    return (f"{endpoint} lists no hashes for {where} ({n} file{'s' if n != 1 else ''}): each is checked against "
            f"the sha256 recorded at its first download, not against the publisher's")
