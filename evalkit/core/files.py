"""Writing result files so that a kill never leaves half a file under the real name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any) -> None:
    """Indented JSON via a temporary file and a rename (summary.json, config.json, comparison.json)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)



def write_text_atomic(path: Path, text: str) -> None:
    """Text via a temporary file and a rename (report.md restated by a reused run)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def data_files(data: Path) -> list[Path]:
    """The files a data set is read from: the file itself, or every non-image, non-hidden file below a
    folder, sorted (what the run identity and lint fingerprint)."""
    if data.is_file():
        return [data]
    return sorted(p for p in data.rglob("*") if p.is_file() and p.suffix.lower() not in IMAGE_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(data).parts))
