"""Reliability fits kept in the run directory, so a re-run does not refit them (issue 35 item 8).

The known/guess mixture's fit with its bootstrap (metrics/reliability.py `fit_histogram`) costs seconds
of CPU, most of it importing scipy.optimize and refitting 200 resampled histograms, yet it is a pure
function of the histogram it is fitted on, the resample count, seed and level. Within a
`fits_kept_in(run_dir)` block (the engine opens one around a run's summary and report) each fit is
looked up in run_dir/FITS by a sha256 of those inputs and of the versions that compute it (evalkit,
numpy, scipy) before it is computed, and kept there after. A fit of other records has another key:
a kept fit is never used for inputs it was not computed from.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit.core.files import write_json_atomic
from evalkit.core.version import __version__

FITS = "reliability-fits.json"

_CURRENT: contextvars.ContextVar[FitStore | None] = contextvars.ContextVar("evalkit_fit_store", default=None)


def _versions() -> str:
    found = [__version__]
    for package in ("numpy", "scipy"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} -")
    return "; ".join(found)


class FitStore:
    """One run directory's kept fits: key -> the fit's fields (JSON)."""

    def __init__(self, path: Path):
        self.path = path
        self._versions: str | None = None
        self._dirty = False
        self._used: set[str] = set()  # what this block asked for: all a save keeps
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or damaged: computed again
            kept = {}
        self.fits: dict[str, dict[str, Any]] = kept if isinstance(kept, dict) else {}

    def key(self, inputs: tuple[Any, ...]) -> str:
        if self._versions is None:
            self._versions = _versions()
        text = json.dumps([list(inputs), self._versions])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, inputs: tuple[Any, ...]) -> dict[str, Any] | None:
        key = self.key(inputs)
        self._used.add(key)
        found = self.fits.get(key)
        return found if isinstance(found, dict) else None

    def put(self, inputs: tuple[Any, ...], fields: dict[str, Any]) -> None:
        key = self.key(inputs)
        self._used.add(key)
        self.fits[key] = fields
        self._dirty = True

    def save(self) -> None:
        """Write the fits this block used (those of earlier records go), when one was computed."""
        if self._dirty or set(self.fits) - self._used:
            self.fits = {k: v for k, v in self.fits.items() if k in self._used}
            with contextlib.suppress(OSError):  # a memo that cannot be written costs the next run a refit
                write_json_atomic(self.path, self.fits)
            self._dirty = False


def current() -> FitStore | None:
    """The store of the `fits_kept_in` block this code runs in, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def _opened(var: contextvars.ContextVar[Any], store: FitStore) -> Iterator[Any]:
    """`store` is the one `var` names in this block, and is saved when the block ends."""
    token = var.set(store)
    try:
        yield store
    finally:
        var.reset(token)
        store.save()


def fits_kept_in(run_dir: Path) -> contextlib.AbstractContextManager[FitStore]:
    """Fits computed in this block are looked up in, and kept in, run_dir's FITS."""
    return _opened(_CURRENT, FitStore(Path(run_dir) / FITS))


SHARED = "intervals.json"  # in the cache folder: kept intervals any run directory may use
SHARED_KEEP = 512  # the most recently used entries kept (each a few numbers)

_SHARED: contextvars.ContextVar[SharedStore | None] = contextvars.ContextVar("evalkit_shared_store", default=None)


class SharedStore(FitStore):
    """Results kept in the cache folder, which several run directories (a fresh --out on a warm cache,
    the shards of a job array) share: a save merges with what other runs kept meanwhile and keeps the
    SHARED_KEEP most recently used, instead of only what this block used."""

    def save(self) -> None:
        if not self._dirty and not self._used:
            return
        try:
            on_disk = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            on_disk = {}
        merged = {k: v for k, v in (on_disk if isinstance(on_disk, dict) else {}).items() if k not in self._used}
        merged.update((k, self.fits[k]) for k in self._used if k in self.fits)  # used last: kept longest
        if merged == on_disk and not self._dirty:
            return
        self.fits = dict(list(merged.items())[-SHARED_KEEP:])
        with contextlib.suppress(OSError):  # a memo that cannot be written costs the next run a recomputation
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, self.fits)
        self._dirty = False


def shared() -> SharedStore | None:
    """The cache folder's store of the `shared_kept_in` block this code runs in, if any."""
    return _SHARED.get()


def shared_kept_in(cache_dir: Path | None) -> contextlib.AbstractContextManager[SharedStore | None]:
    """Intervals computed in this block are looked up in, and kept in, cache_dir's SHARED (None: no
    cache folder, nothing kept)."""
    if cache_dir is None:
        return contextlib.nullcontext(None)
    return _opened(_SHARED, SharedStore(Path(cache_dir) / SHARED))
