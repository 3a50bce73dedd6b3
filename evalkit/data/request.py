"""What resolving a data source is asked (`DataRequest`) and what it answers (`Resolved`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.data.lock import LOCK_NAME, Lock, read_lock
from evalkit.data.source import DataSource

# (label, total bytes) -> a callback advancing that bar by n bytes (None: show nothing)
Progress = Callable[[str, int], "Callable[[int], None] | None"]


@dataclass(frozen=True)
class Resolved:
    """What the benchmark loads and where it came from."""

    path: Path  # a file or folder; under the Hub cache a snapshot path (links not resolved)
    source: DataSource
    roots: tuple[Path, ...] = ()  # folders images may lead into besides the data's (the Hub cache's blobs)
    option_defaults: Mapping[str, str] = field(default_factory=dict)  # e.g. an image folder from a 2nd source
    parts: tuple[DataSource, ...] = ()  # every source read (the registry may name more than one)
    local_files: tuple[Path, ...] = ()  # the data files read, where the folder may hold more (a source's cache)
    pending: Mapping[str, int] = field(default_factory=dict)  # plan_only: files still to download -> bytes
    notes: tuple[str, ...] = ()  # lines to say once (e.g. an endpoint whose listing gives no hashes)
    unchecked: Mapping[str, int] = field(default_factory=dict)  # part uri -> files pinned, not checked
    # a registered source's files (absolute path as read) -> (the sha256 it records, where their saved
    # indexes go: beside the Hub cache), for the readers' indexes (benchmarks/readers/saved_index.py)
    indexes: Mapping[str, tuple[str, Path]] = field(default_factory=dict)


@dataclass(frozen=True)
class DataRequest:
    """Everything resolving needs, passed in: no global state, so tests and threads can differ."""

    bench: str
    data: str | Path | None
    options: Mapping[str, Any]
    env: Mapping[str, str]
    lock_path: Path | None = None  # None: ./evalkit.lock if it exists
    default_sample: str | None = None  # the benchmark's bundled sample (dataset_path parts)
    plan_only: bool = False  # --dry-run: ask metadata, download nothing
    progress: Progress | None = None


def load_lock(req: DataRequest) -> Lock | None:
    path = req.lock_path if req.lock_path is not None else Path(LOCK_NAME)
    if req.lock_path is not None and not path.is_file():
        raise EvalkitError(f"--lock {path}: no such file")
    return read_lock(path)


