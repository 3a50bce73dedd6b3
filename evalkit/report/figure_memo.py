"""Figures drawn before, kept in the cache folder by the digest of what they show.

A run on a fresh --out whose answers all come from the cache shows the same figures a run directory
already holds: drawing them again costs a matplotlib import and a second or more of CPU. The
figures of each drawn set are copied into FIGURES/<digest>/ (report/figures.py `inputs_digest`: the
figures' data, the code that draws them, matplotlib's version), and a later run with the same digest
copies them out instead. The newest KEEP sets are kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

FIGURES = "figures"  # in the cache folder
KEEP = 32


class FigureMemo:
    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def copy_out(self, digest: str, paths: Sequence[Path]) -> bool:
        """Copy the kept figures of `digest` to `paths` (by name); False when they are not all kept."""
        kept = self.folder / digest
        sources = [kept / p.name for p in paths]
        if not all(src.is_file() for src in sources):
            return False
        try:
            for src, dst in zip(sources, paths, strict=True):
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(f".{dst.name}.tmp")
                shutil.copyfile(src, tmp)
                os.replace(tmp, dst)
            os.utime(kept)  # recently used: kept longest
        except OSError:
            return False
        return True

    def keep(self, digest: str, paths: Sequence[Path]) -> None:
        """Keep copies of freshly drawn figures (a figure set that cannot be kept is drawn next time)."""
        kept = self.folder / digest
        if all((kept / p.name).is_file() for p in paths):
            return
        shutil.rmtree(kept, ignore_errors=True)  # an incomplete set (a figure removed): kept anew
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.folder))
            try:
                for p in paths:
                    shutil.copyfile(p, staging / p.name)
                os.replace(staging, self.folder / digest)  # whole, or not at all
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            self._prune()

    def _prune(self) -> None:
        sets = sorted((p for p in self.folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
                      key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in sets[KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
