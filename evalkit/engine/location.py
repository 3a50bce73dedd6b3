"""Where a run lives: its identity, its run directory, and the folders it made on the way.

The directory is --out, else the default for the run's identity, else the one evalkit 0.2 (which kept
the host's case in the endpoint) or 0.1.0 used for the same command; --reask-cutoffs finds the run
it asks again instead. A run that cannot start and received nothing removes the folders it made.
Apart from evaluate.py, so the run's flow reads without these path rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalkit.benchmarks.prepare import Prepared, resolve_images
from evalkit.benchmarks.readers.saved_index import LOCAL_FOLDER as INDEX_FOLDER
from evalkit.benchmarks.readers.saved_index import index_files
from evalkit.benchmarks.run_settings import RunSettings
from evalkit.core.errors import EvalkitError
from evalkit.core.types import Query
from evalkit.engine.cutoffs import check_budget, run_cut_off, with_budget
from evalkit.engine.run_data import data_files_read
from evalkit.providers import ProviderSpec
from evalkit.rundir.identity import (
    DataFingerprint,
    FileHashes,
    data_fingerprint_parts,
    legacy_identity,
    run_identity,
)
from evalkit.rundir.layout import RunDir, default_run_dir, remove_own_dir

FILE_HASHES = "file-hashes.json"  # in the cache folder: sha256 of data files and images (identity.FileHashes)


@dataclass(frozen=True)
class Located:
    """Where the run lives and what identifies it."""

    rundir: RunDir
    identity: dict[str, Any]
    legacy: dict[str, Any]
    note: str | None  # set when a 0.1.0 run directory is resumed
    data: DataFingerprint
    created: tuple[Path, ...] = ()  # folders this run makes (the cache's, the run directory's parent)
    known: Mapping[str, tuple[int, int, str]] = field(default_factory=dict)  # data file / image -> (.., sha256)


def locate_run(s: RunSettings, spec: ProviderSpec, prepared: Prepared, env: Mapping[str, str]) -> Located:
    """The run identity (with the data's content fingerprint) and the run directory: --out, else the
    default for this identity, else the directory 0.1.0 used for the same command if that exists.
    The defaults are in runs/, or in the `runs_root` hook's folder (a matrix's --out)."""
    cfg = s.config
    root = Path(s.hooks.get("runs_root") or "runs")
    cache_dir = Path(cfg.cache_path(env))
    fresh_cache = () if cfg.no_cache or cache_dir.exists() else (cache_dir, *_absent_parents(cache_dir))
    data, known = data_of(prepared, cfg.images, None if cfg.no_cache else cache_dir / FILE_HASHES,
                          save=not cfg.dry_run)
    identity = run_identity(s.bench_name, s.options, cfg, spec.label, spec.endpoint, data.sha256)
    legacy = legacy_identity(s.bench_name, s.given, spec.label, spec.legacy_endpoint, prepared.data)
    # 0.2 kept the host's case in the endpoint: a run it started goes on under the identity it has
    kept = spec.case_kept_endpoint
    earlier = (run_identity(s.bench_name, s.options, cfg, spec.label, kept, data.sha256)
               if kept != spec.endpoint else None)
    if cfg.out:
        out = Path(cfg.out)
        if earlier is not None and _saved_endpoint(out) == kept:
            identity = earlier
        return Located(RunDir(out), identity, legacy, None, data, (*fresh_cache, *_absent_parents(out)), known)
    new = default_run_dir(s.bench_name, spec.label, identity, root)
    if earlier is not None and not new.exists():
        before = default_run_dir(s.bench_name, spec.label, earlier, root)
        if (before / "config.json").exists():
            return Located(RunDir(before), earlier, legacy, None, data, fresh_cache, known)
    old = default_run_dir(s.bench_name, spec.label, legacy, root)
    if not new.exists() and (old / "config.json").exists():
        return Located(RunDir(old), identity, legacy,
                        f"resuming {old}, written by evalkit 0.1.0 (config.json rewritten in today's form; "
                        f"runs of these settings that do not find it go to {new})", data, fresh_cache, known)
    return Located(RunDir(new), identity, legacy, None, data, (*fresh_cache, *_absent_parents(new)), known)


def data_of(prepared: Prepared, images: str | None, memo_file: Path | None, *,
            save: bool = True) -> tuple[DataFingerprint, dict[str, tuple[int, int, str]]]:
    """The data's content fingerprint as the run identity holds it, and the files it hashed
    (path -> (mtime_ns, size, sha256)); `memo_file`: the cache folder's file hashes (None: none kept).
    `evalkit run` and `evalkit report` both compute it here: the same data is the same fingerprint."""
    hashes = FileHashes(memo_file)
    if prepared.index is not None:
        hashes.learn(prepared.index.hashes)  # hashed as they were read (or found in their saved index)
    data = data_fingerprint_parts(prepared.data, prepared.items, hashes, resolve_images(images),
                                  only=data_files_read(prepared))
    if save:
        hashes.save()
    return data, dict(hashes.known)


def locate_cut_off_run(where: Located, queries: list[Query], budget: int) -> tuple[Located, list[Query]]:
    """--reask-cutoffs: the run directory of this command but for --max-tokens, and the queries as that
    run asked them (its max_tokens); the cut-off ones are asked again with `budget` once resumed."""
    default = where.rundir.path
    prefix = default.name.rsplit("-", 1)[0] + "-"
    candidates = [default] if where.note is None and (default / "config.json").exists() else []
    candidates += sorted(p for p in default.parent.glob(prefix + "*") if p != default)
    found = run_cut_off(where.identity, candidates)
    if found is None:
        raise EvalkitError(f"--reask-cutoffs: no run directory holds this run (but for --max-tokens) under "
                           f"{default.parent}; run the command without --reask-cutoffs first, or name it with --out")
    path, identity = found
    queries = [with_budget(q, identity.get("max_tokens")) for q in queries]
    check_budget(budget, queries)
    return replace(where, rundir=RunDir(path), identity=identity, note=None), queries


def _saved_endpoint(run_dir: Path) -> object:
    """The endpoint in the identity a run directory's config.json holds (None if it has none)."""
    try:
        saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        return saved["identity"]["endpoint"]
    except (OSError, ValueError, TypeError, KeyError):  # no run there yet, or a damaged config bind() names
        return None


def _absent_parents(path: Path) -> tuple[Path, ...]:
    """The parents of `path` that do not exist yet, innermost first."""
    return tuple(p for p in path.absolute().parents if not p.exists())


def forget_created(created: tuple[Path, ...]) -> None:
    """Remove the folders a run that received nothing made: the cache's (with its empty database and
    the data's file hashes and lint) and the run directory's parents, each only while it holds nothing else."""
    for path in created:
        lint = path / "lint"  # the data's lint, kept by the cache folder this run made
        if lint.is_dir():
            remove_own_dir(lint, {p.name for p in lint.glob("*.json")})
        index = path / INDEX_FOLDER  # the data files' saved indexes (benchmarks/readers/saved_index.py)
        if index.is_dir():
            remove_own_dir(index, {p.name for p in index_files(index)})
        claims = path / "claims"  # the claims database of processes sharing the folder (ask.claims)
        if claims.is_dir():
            remove_own_dir(claims, {"cache.db", "cache.db-wal", "cache.db-shm"})
        remove_own_dir(path, {"cache.db", "cache.db-wal", "cache.db-shm", FILE_HASHES})
