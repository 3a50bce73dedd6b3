"""The full lint result, kept in the cache folder while the data it describes is unchanged.

`evalkit lint` decodes every image; `evalkit run` checks only text and file sizes at its start, but
when a full result for the very same data exists it reports that instead. The key is the data's
fingerprint (`data_key`: every data file and every image the items reference, by path, size and
modification time), the benchmark, the ids of the items checked (another --skills or --limit is
another set), and the lint version, so a changed check never reuses an old result.

The fingerprint is lint's own, not the run identity's content hash (engine.identity): lint sits
below the engine, and a stat per file is all a run can spare at its start. It is stricter than a
content hash: any edit changes it, and a copied data set gets a new key (one more full lint),
never a stale result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from evalkit.core import read_caps
from evalkit.core.files import data_files
from evalkit.core.types import Item
from evalkit.core.version import __version__
from evalkit.lint.model import LintReport

LINT_VERSION = 2  # 2: images over the cap, rows with cells past the header
FOLDER = "lint"


def data_key(data: Path, items: Sequence[Item]) -> str:
    """sha256 over (path, size, mtime) of the data file(s) and of every image file the items name
    (paths relative to the data folder; inline images are part of their data file)."""
    data = Path(data)
    root = data if data.is_dir() else data.parent
    files = data_files(data)
    images = dict.fromkeys(str(r.value) for it in items for r in it.images if r.kind == "path")
    h = hashlib.sha256()
    for kind, names in (("file", [str(p) for p in files]), ("image", list(images))):
        for name in names:
            try:
                st = os.stat(name)
                stamp = f"{st.st_size} {st.st_mtime_ns}"
            except OSError:
                stamp = "missing"
            h.update(f"{kind} {os.path.relpath(name, root)} {stamp}\n".encode())
    return h.hexdigest()


def result_key(bench: str, data_sha256: str, item_ids: Sequence[str]) -> str:
    ids = hashlib.sha256("\n".join(item_ids).encode()).hexdigest()
    blob = json.dumps({"lint": LINT_VERSION, "evalkit": __version__, "benchmark": bench, "data": data_sha256,
                       "items": ids, **read_caps.caps().key()}, sort_keys=True)  # (caps: {} at the defaults)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _path(cache_dir: Path, key: str, checks: str) -> Path:
    return Path(cache_dir) / FOLDER / (f"{key}.json" if checks == "full" else f"{key}.{checks}.json")


def load_result(cache_dir: Path | None, key: str, checks: str = "full") -> tuple[LintReport, str] | None:
    """(the stored report of these checks, when it was made) or None; a damaged entry counts as none."""
    if cache_dir is None:
        return None
    try:
        saved = json.loads(_path(cache_dir, key, checks).read_text(encoding="utf-8"))
        return LintReport.from_dict(saved["report"]), str(saved.get("created") or "")
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return None


def store_result(cache_dir: Path | None, key: str, report: LintReport) -> None:
    """Keep a report under its checks (best effort: a read-only cache folder costs only the reuse)."""
    if cache_dir is None:
        return
    path = _path(cache_dir, key, report.checks)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        created = time.strftime("%Y-%m-%d %H:%M:%S")
        tmp.write_text(json.dumps({"key": key, "created": created, "report": report.to_dict()}, ensure_ascii=False),
                       encoding="utf-8")
        os.replace(tmp, path)
