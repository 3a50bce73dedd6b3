"""A run's identity: what makes two runs the same run, so the same command resumes in the same
directory, for as long as users keep their run directories.

Identity = benchmark + that benchmark's own options + model and endpoint + generation and image
size settings + mode + limit + a fingerprint of the data's *content* + IDENTITY_VERSION. Only
values that differ from their defaults enter it, so adding an option never moves an identity;
changing a default must bump IDENTITY_VERSION and add a migration below. The judge and every
operational setting (concurrency, paths, cache, ...) are never part of it.

0.1.0 (commit 881f989) hashed a different dict: every non-operational option given, the data
file's absolute path, no version. `legacy_identity` recomputes it, so a 0.1.0 run directory is
found and resumed (and its config.json rewritten in this form).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.benchmarks import benchmark_class
from evalkit.benchmarks.run_settings import RunSettings, resolve_settings
from evalkit.core.files import data_files
from evalkit.core.settings import RunConfig, field_names, non_default
from evalkit.core.types import Item
from evalkit.images.files import open_regular

IDENTITY_VERSION = 1

# 0.1.0's operational keys (evalkit/evaluate.py OPERATIONAL_KEYS at 881f989): never in its identity.
_LEGACY_OPERATIONAL = {"concurrency", "rpm", "tpm", "timeout", "max_attempts", "cache_dir", "no_cache", "out",
                       "judge", "judge_base_url", "progress", "env", "console", "base_url", "on_record",
                       "dry_run", "max_cost", "prices", "group_images", "data",
                       # operational flags added since 0.1.0: giving one must not hide a 0.1.0 directory
                       "max_retry_after", "max_response_mb", "reask_changed", "reask", "allow_outside_images",
                       "plots", "batch", "wait", "batch_timeout", "batch_fallback", "adaptive",
                       "repeats",  # more repeats grow the same run (docs/repeats.md)
                       "lock",  # the data lock: the bytes it pins enter the identity as the data fingerprint
                       "shared_budget",  # where the --max-cost ledger is kept, not what is asked
                       "reask_cutoffs", "strict", "api_version", "cache_url", "cache_fallback", "cache_signed_only",
                       "batch_tokens",  # its --max-tokens is the cut-offs' budget, not the run's
                       "max_line_mb", "max_image_mb",  # what may be read, not what is asked
                       "until_ci", "sample_seed", "until_decided", "width"}  # a sample grows the same run
# Protocol defaults that 0.1.0 wrote out (or that a user may have typed): equal to today's defaults.
_DEFAULTS_FOR_VIEW = {"mode": "official", "rotations": 1, "circular": False, "td_any_category": False,
                      "genvip": False, "prior": False, "translated": False, "skip_missing": False}


def run_identity(bench: str, bench_options: Any, config: RunConfig, model: str, endpoint: str,
                 data_sha256: str) -> dict[str, Any]:
    ident: dict[str, Any] = {"identity_version": IDENTITY_VERSION, "benchmark": bench, "model": model,
                             "endpoint": endpoint, "data_sha256": data_sha256}
    ident.update(non_default(config, roles=("identity", "generation")))
    ident.update(non_default(bench_options, roles=("identity", "generation")))
    return _jsonable(ident)


def legacy_identity(bench: str, given: Mapping[str, Any], model: str, endpoint: str, data: Path) -> dict[str, Any]:
    """The identity 0.1.0 computed for the same command: `given` holds the options as the user gave
    them (CLI values as argparse typed them, API keywords as passed)."""
    ident = {k: v for k, v in {"mode": "official", **given}.items() if k not in _LEGACY_OPERATIONAL and v is not None}
    ident.update(benchmark=bench, model=model, endpoint=endpoint, data=str(data))
    return _jsonable(ident)


def is_legacy(identity: Mapping[str, Any]) -> bool:
    return "identity_version" not in identity


def protocol_view(identity: Mapping[str, Any]) -> dict[str, Any]:
    """An identity of any version in today's terms (defaults dropped, `extra` parsed, the data
    fingerprint or 0.1.0's path under "data"), so runs of both versions can be compared."""
    out: dict[str, Any] = {}
    for key, value in identity.items():
        if key in ("identity_version",) or value is None or _DEFAULTS_FOR_VIEW.get(key, object()) == value:
            continue
        if key == "extra" and isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        out["data" if key == "data_sha256" else key] = value
    return out


def _jsonable(obj: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


# ---- the data's content --------------------------------------------------------------------


class FileHashes:
    """sha256 of files, memoised by (path, size, mtime, inode, ctime) in a small JSON file (in the cache
    folder), so a re-run does not re-read unchanged images. The inode and change time catch what size
    and mtime miss: a file rewritten in place or replaced by another of the same size, its mtime set
    back (setting it back changes the ctime). Without a memo file it only memoises in memory."""

    def __init__(self, memo_file: Path | None = None, memo: dict[str, list[Any]] | None = None):
        """`memo`: path -> [size, mtime_ns, sha256, inode, ctime_ns] kept elsewhere by the caller (`memo_of`
        after use); an entry written before the inode and ctime were kept is read once more, then kept so."""
        self.memo_file = memo_file
        self._memo: dict[str, list[Any]] = dict(memo or {})
        self._dirty = False
        self.reads = 0  # files read to hash them (the rest were known by path, size, mtime, inode and ctime)
        if memo_file is not None and memo_file.is_file():
            try:
                loaded = json.loads(memo_file.read_text(encoding="utf-8"))
                self._memo = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._memo = {}  # a damaged memo costs one re-read, nothing more
        self.known: dict[str, tuple[int, int, str]] = {}  # path -> (mtime_ns, size, sha) seen in this run

    def sha256(self, path: str) -> str:
        st = os.stat(path)
        stamp = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
        hit = self._memo.get(path)
        if isinstance(hit, list) and len(hit) == 5 and [hit[0], hit[1], hit[3], hit[4]] == stamp:
            sha = str(hit[2])
        else:
            h = hashlib.sha256()
            with open_regular(path) as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            sha = h.hexdigest()
            self.reads += 1
            self._memo[path] = [st.st_size, st.st_mtime_ns, sha, st.st_ino, st.st_ctime_ns]
            self._dirty = True
        self.known[path] = (st.st_mtime_ns, st.st_size, sha)
        return sha

    def learn(self, entries: Mapping[str, Sequence[Any]]) -> None:
        """Hashes made elsewhere (the data's saved index hashed each file as it read it), in the memo's
        form: path -> [size, mtime_ns, sha256, inode, ctime_ns]; kept as if this memo had made them."""
        for path, entry in entries.items():
            if self._memo.get(path) != list(entry):
                self._memo[path] = list(entry)
                self._dirty = True

    def memo_of(self, paths: Iterable[str]) -> dict[str, list[Any]]:
        """The memo entries of these paths (what a caller keeping its own memo saves)."""
        return {p: self._memo[p] for p in paths if p in self._memo}

    def save(self) -> None:
        if not (self._dirty and self.memo_file is not None):
            return
        try:
            self.memo_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.memo_file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self._memo, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, self.memo_file)
            self._dirty = False
        except OSError:
            pass  # the memo is an optimisation; a read-only cache folder must not stop a run


@dataclass(frozen=True)
class DataFingerprint:
    """The data's content hash (`sha256`, the one in the identity) and its two halves, kept in
    config.json so that a run refused for changed data can say what changed."""

    sha256: str
    files: str  # the data file(s)
    images: str  # the images the items reference

    def to_dict(self) -> dict[str, str]:
        return {"files": self.files, "images": self.images}


def describe_data_change(saved: Any, now: Mapping[str, str] | None) -> str:
    """What differs between two `DataFingerprint.to_dict()`s: "the data file", "the images" or both
    (either may be absent: a run directory written before they were kept)."""
    if not isinstance(saved, Mapping) or not isinstance(now, Mapping):
        return "the data file or its images"
    parts = [name for key, name in (("files", "the data file"), ("images", "the images"))
             if saved.get(key) != now.get(key)]
    return " and ".join(parts) or "the data file or its images"


def data_fingerprint(data: Path, items: Sequence[Item], hashes: FileHashes, images: Path | None = None) -> str:
    """sha256 over the data file(s) and every image an item references (its path relative to the
    data or --images folder, and the hash of its bytes): moving a dataset keeps it, editing a
    question or replacing an image changes it."""
    return data_fingerprint_parts(data, items, hashes, images).sha256


def data_fingerprint_parts(data: Path, items: Sequence[Item], hashes: FileHashes,
                           images: Path | None = None, only: Sequence[Path] | None = None) -> DataFingerprint:
    """`data_fingerprint`, with the hashes of its data-file and image halves. `only`: the data files a
    run reads where the folder may hold more (an official source's cache holds every set fetched)."""
    root = data if data.is_dir() else data.parent
    whole, files, pictures = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    for path in (sorted(only) if only is not None else data_files(data)):
        line = f"file {_rel(path, root, None)} {hashes.sha256(str(path))}\n".encode()
        whole.update(line)
        files.update(line)
    seen: set[str] = set()
    resolved = _Resolver()
    for item in items:
        for ref in item.images:
            if ref.kind != "path" or str(ref.value) in seen:
                continue  # inline images (TSV base64) are covered by the file's own hash
            seen.add(str(ref.value))
            try:
                sha = hashes.sha256(str(ref.value))
            except OSError:
                sha = "missing"  # reported as a per-query error when asked; the identity still stands
            line = f"image {_rel(Path(str(ref.value)), root, images, resolved)} {sha}\n".encode()
            whole.update(line)
            pictures.update(line)
    return DataFingerprint(whole.hexdigest(), files.hexdigest(), pictures.hexdigest())


class _Resolver:
    """Path.resolve() of many files in few folders: each folder's links are resolved once, not once per
    picture (a file that is itself a link is resolved whole, as before)."""

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}

    def __call__(self, path: Path) -> str:
        text = os.fspath(path)
        folder, name = os.path.split(text)
        if not os.path.isabs(text) or name in ("", ".", "..") or os.path.islink(text):
            return str(Path(text).resolve())
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = str(Path(folder).resolve())
        return os.path.join(real, name)


def _rel(path: Path, root: Path, images: Path | None, resolve: _Resolver | None = None) -> str:
    """The path relative to its folder. Links are followed as they always were, except where that leaves
    the folder: the Hub cache's snapshot links lead into `blobs/`, and a file is named by its place in
    the snapshot (the same bytes under the same names are the same data, wherever they are cached)."""
    base = images if images is not None and _under(path, images) else root
    rel = os.path.relpath(resolve(path) if resolve is not None else Path(path).resolve(), base)
    if rel.startswith(".."):
        plain = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
        rel = rel if plain.startswith("..") else plain
    return Path(rel).as_posix()


def _under(path: Path, folder: Path) -> bool:
    try:
        Path(path).resolve().relative_to(folder)
        return True
    except ValueError:
        return False


def saved_settings(saved: Mapping[str, Any]) -> RunSettings:
    """The settings a run directory's config.json (of any version) was run with, for re-scoring."""
    identity, config = saved.get("identity", {}), saved.get("config", {})
    given = {k: v for k, v in identity.items()
             if k not in ("identity_version", "benchmark", "model", "endpoint", "data_sha256", "data")}
    given["data"] = config.get("data") or identity.get("data")
    if config.get("images") or identity.get("images"):
        given["images"] = config.get("images") or identity.get("images")
    bench = str(identity["benchmark"])
    known = set(field_names(RunConfig)) | set(field_names(benchmark_class(bench).Options))
    # 0.1.0 accepted any benchmark's flag on any run: such a setting did nothing, so it is dropped here
    return resolve_settings(bench, str(identity.get("model", "")), {k: v for k, v in given.items() if k in known})
