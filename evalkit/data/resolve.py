"""`--data SOURCE` to files on disk and a `data_source` record: the bundled sample, a local path, a
dataset on the Hub, or — with no `--data` — the benchmark's official source from the registry
(pinned by the lock when there is one, checked file by file)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.data.archive import read_git
from evalkit.data.checksums import file_digest
from evalkit.data.hub import (
    HubEnv,
    Snapshot,
    Unreachable,
    cached_commit,
    drop_download,
    fetch,
    local_snapshot,
    repo_folder,
    resolve_remote,
    select,
)
from evalkit.data.lock import check_against, lock_key
from evalkit.data.progress import tqdm_bridge
from evalkit.data.registry import RegistrySource, sources_for
from evalkit.data.request import DataRequest, Resolved, load_lock
from evalkit.data.source import COMMIT, DataSource, HubRef, is_hub, is_sample, parse_hub

_SHA256 = re.compile(r"[0-9a-f]{64}")


def sample_source(bench: str, default_sample: str | None) -> Resolved:
    if default_sample is None:
        raise EvalkitError(f"benchmark '{bench}' has no bundled sample; pass --data PATH")
    path = dataset_path(default_sample)
    return Resolved(path.resolve(), DataSource("sample", f"sample:{default_sample}"))


def local_source(data: str | Path) -> Resolved:
    path = Path(data).expanduser()
    if not path.exists():
        raise EvalkitError(f"data not found: {path}")
    return Resolved(path.resolve(), DataSource("local", str(path.resolve())))


def _hub_sha256(local: Path) -> str:
    """sha256 of a Hub cache file: its blob name when that is one (LFS files), else read."""
    name = os.path.basename(os.readlink(local)) if local.is_symlink() else ""
    return name if _SHA256.fullmatch(name) else file_digest(local, "sha256")


def read_hub(ref: HubRef, wanted: list[str], req: DataRequest, md5s: Mapping[str, str] | None = None,
             label: str | None = None) -> tuple[Snapshot, dict[str, Path], DataSource, dict[str, int]]:
    """Resolve, fetch and check one Hub source; the lock (if any) pins its commit and bytes."""
    hub = HubEnv.from_env(req.env)
    lock = load_lock(req)
    key = lock_key("hub", f"hf://{ref.repo}", hub.endpoint)
    pinned = lock.pinned(key) if lock is not None else None
    if pinned is not None and pinned.commit and ref.revision in (None, pinned.revision):
        ref = replace(ref, revision=pinned.commit)  # a locked re-run reads the locked commit
    rev = ref.revision or "main"
    if hub.offline:
        snapshot = local_snapshot(ref, hub, "HF_HUB_OFFLINE=1 forbids asking the Hub")
    elif COMMIT.fullmatch(rev) and _all_cached(hub, ref, wanted):
        snapshot = local_snapshot(ref, hub, "")  # a commit pin with every file cached: nothing to ask
    else:
        try:
            snapshot = resolve_remote(ref, hub)
        except Unreachable:
            if cached_commit(hub, ref) is None:
                raise
            snapshot = local_snapshot(ref, hub, "the Hub cannot be reached")  # what is cached still reads
    paths = select(snapshot, wanted)
    if req.plan_only:  # what is cached, and what a run would download (the listing's sizes)
        cached = {p: snapshot.root / p for p in paths if (snapshot.root / p).is_file()}
        pending = {p: snapshot.listing[p].size if snapshot.listing and p in snapshot.listing else 0
                   for p in paths if p not in cached}
        return snapshot, cached, DataSource("hub", ref.uri, hub.endpoint, ref.revision or "main", snapshot.commit), pending
    total = sum(snapshot.listing[p].size for p in paths if snapshot.listing and p in snapshot.listing
                and not (snapshot.root / p).is_file())
    advance = req.progress(label or ref.uri, total) if req.progress and total else None
    got = fetch(snapshot, paths, hub, progress=advance, bar=tqdm_bridge(advance))
    for p in sorted(got.fresh):
        want = (md5s or {}).get(p)
        if want:
            found = file_digest(got.files[p], "md5")
            if found != want:
                drop_download(got.files[p])
                raise EvalkitError(f"{ref.uri}@{snapshot.commit[:12]}: {p}: md5 {found} is not the published {want}; "
                                   f"the file was removed and nothing was asked")
    files = {p: _hub_sha256(local) for p, local in got.files.items()}
    if lock is not None:
        check_against(lock, key, files)
    source = DataSource("hub", ref.uri, hub.endpoint, ref.revision or "main", snapshot.commit, files)
    return snapshot, got.files, source, {}


def _all_cached(hub: HubEnv, ref: HubRef, wanted: list[str]) -> bool:
    root = repo_folder(hub, ref.repo) / "snapshots" / str(ref.revision)
    return root.is_dir() and all((root / w).exists() for w in wanted if w not in ("", "/"))


def hub_source(text: str, req: DataRequest) -> Resolved:
    ref = parse_hub(text)
    snapshot, files, source, pending = read_hub(ref, [ref.path], req)
    path = snapshot.root / ref.path if ref.path else snapshot.root
    return Resolved(path, source, roots=_blob_roots(snapshot), parts=(source,), local_files=tuple(files.values()),
                    pending=pending)


def _blob_roots(snapshot: Snapshot) -> tuple[Path, ...]:
    return (snapshot.root.parent.parent / "blobs",)


def official_source(req: DataRequest, entries: tuple[RegistrySource, ...]) -> Resolved:
    """The benchmark's registered sources: the first is the data, the others fill option defaults."""
    resolved: list[Resolved] = []
    for entry in entries:
        wanted = entry.wanted(req.options)
        if not wanted:
            continue
        if entry.kind != "hub":
            resolved.append(read_git(entry, wanted, req))
            continue
        md5s = {f.path: f.md5 for f in wanted if f.md5}
        ref = HubRef(entry.repo, None if entry.revision == "main" else entry.revision)
        snapshot, files, source, pending = read_hub(ref, [f.path for f in wanted], req, md5s, label=entry.name)
        root = snapshot.root / entry.root if entry.root else snapshot.root
        resolved.append(Resolved(root, source, roots=_blob_roots(snapshot), option_defaults=entry.fills(root),
                                 local_files=tuple(files.values()), pending=pending))
    if not resolved:
        raise EvalkitError(f"{req.bench}: no official file matches these options")
    first = resolved[0]
    defaults: dict[str, str] = {}
    for r in resolved:
        defaults.update(r.option_defaults)
    return Resolved(first.path, first.source, tuple(p for r in resolved for p in r.roots), defaults,
                    tuple(r.source for r in resolved), first.local_files,
                    {f"{r.source.base_uri}/{p}": n for r in resolved for p, n in r.pending.items()})


def resolve_source(req: DataRequest) -> Resolved:
    """`--data` as given: "sample", "hf://…", a path; or None: the registry's official source, else a
    benchmark without one says how to name its data."""
    if is_sample(req.data):
        return sample_source(req.bench, req.default_sample)
    if is_hub(req.data):
        return hub_source(str(req.data), req)
    if req.data is not None:
        return local_source(req.data)
    entries = sources_for(req.bench, req.env)
    if entries:
        return official_source(req, entries)
    if req.bench == "mcq":  # no benchmark of its own: the bundled demo set, labelled a sample
        return sample_source(req.bench, req.default_sample)
    raise EvalkitError(f"benchmark '{req.bench}' has no registered official source in this release: name its data "
                       f"with --data PATH (or hf://OWNER/NAME), or --data sample for the bundled sample")
