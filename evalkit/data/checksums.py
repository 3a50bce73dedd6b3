"""Checksums of files as their publishers state them: sha256 (the Hub's LFS files, our locks), md5
(VLMEvalKit's published sums) and git's blob id (sha1 over a header and the bytes: every file a git
repository or the Hub's tree listing names, without a separate checksum being published)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20


def file_digest(path: str | Path, algorithm: str) -> str:
    """Hex digest of a file's bytes; `algorithm` is "sha256", "md5" or "git" (git's blob id)."""
    if algorithm == "git":
        h = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode(), usedforsecurity=False)
    else:
        h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()
