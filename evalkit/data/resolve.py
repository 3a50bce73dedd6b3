"""`--data SOURCE` to files on disk and a `data_source` record: the bundled sample, a local path, a
dataset on the Hub, or — with no `--data` — the benchmark's official source from the registry
(pinned by the lock when there is one, checked file by file)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.data.archive import read_git
from evalkit.data.checksums import file_digest
from evalkit.data.hub import (
    INDEX_FOLDER,
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
from evalkit.data.pins import unlisted_note
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


@dataclass(frozen=True)
class HubRead:
    """One Hub source read: its snapshot, its files on disk, its record, what a plan would download,
    and the lines to say once (a listing without hashes)."""

    snapshot: Snapshot
    files: dict[str, Path]
    source: DataSource
    pending: dict[str, int]
    notes: tuple[str, ...] = ()
    unchecked: int = 0  # files the listing gives no hash of (pinned by their first download's sha256)


def read_hub(ref: HubRef, wanted: list[str], req: DataRequest, md5s: Mapping[str, str] | None = None,
             label: str | None = None, md5_from: str = "", sha256s: Mapping[str, str] | None = None) -> HubRead:
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
        return HubRead(snapshot, cached, DataSource("hub", ref.uri, hub.endpoint, ref.revision or "main",
                                                    snapshot.commit), pending)
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
                raise EvalkitError(refusal("md5", ref, snapshot.commit, p, found, want, md5_from, req.bench))
    files = {p: got.sha256.get(p) or _hub_sha256(local) for p, local in got.files.items()}
    for p in sorted(got.fresh):
        want = (sha256s or {}).get(p)
        if want and files[p] != want:
            drop_download(got.files[p])
            raise EvalkitError(refusal("sha256", ref, snapshot.commit, p, files[p], want, "the registry", req.bench))
    if lock is not None:
        check_against(lock, key, files)
    source = DataSource("hub", ref.uri, hub.endpoint, ref.revision or "main", snapshot.commit, files)
    note = unlisted_note(hub.endpoint, f"{ref.uri}@{snapshot.commit[:12]}", got.unlisted)
    return HubRead(snapshot, got.files, source, {}, (note,) if note else (), len(got.unlisted))


def refusal(kind: str, ref: HubRef, commit: str, path: str, found: str, want: str, source: str, bench: str) -> str:
    """An official file whose checksum is not the published one: what it is, and the ways on."""
    source = f" ({source})" if source else ""
    return (f"{ref.uri}@{commit[:12]}: {path}: {kind} {found} is not the published {want}{source}; the file was removed "
            f"and nothing was asked. `evalkit data verify {bench}` checks what is cached; for a copy of your own, "
            f"pass --data PATH; for a mirror holding other files, point EVALKIT_REGISTRY at a registry file naming "
            f"them (docs/data.md)")


def _all_cached(hub: HubEnv, ref: HubRef, wanted: list[str]) -> bool:
    root = repo_folder(hub, ref.repo) / "snapshots" / str(ref.revision)
    return root.is_dir() and all((root / w).exists() for w in wanted if w not in ("", "/"))


def hub_source(text: str, req: DataRequest) -> Resolved:
    ref = parse_hub(text)
    got = read_hub(ref, [ref.path], req)
    path = got.snapshot.root / ref.path if ref.path else got.snapshot.root
    return Resolved(path, got.source, roots=_blob_roots(got.snapshot), parts=(got.source,),
                    local_files=tuple(got.files.values()), pending=got.pending, notes=got.notes,
                    unchecked={got.source.uri: got.unchecked} if got.unchecked else {}, indexes=_indexes(got))


def _indexes(got: HubRead) -> dict[str, tuple[str, Path]]:
    """Each file read -> (its sha256 as the source records it, the folder of the saved indexes beside
    the repository's cache: snapshots/<commit>/../../evalkit-index)."""
    folder = got.snapshot.root.parent.parent / INDEX_FOLDER
    return {os.path.abspath(local): (got.source.files[p], folder) for p, local in got.files.items()
            if got.source.files.get(p)}


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
        got = read_hub(ref, [f.path for f in wanted], req, md5s, label=entry.name, md5_from=entry.checksum_source,
                       sha256s={f.path: f.sha256 for f in wanted if f.sha256})
        root = got.snapshot.root / entry.root if entry.root else got.snapshot.root
        resolved.append(Resolved(root, got.source, roots=_blob_roots(got.snapshot), option_defaults=entry.fills(root),
                                 local_files=tuple(got.files.values()), pending=got.pending, notes=got.notes,
                                 unchecked={got.source.uri: got.unchecked} if got.unchecked else {},
                                 indexes=_indexes(got)))
    if not resolved:
        raise EvalkitError(f"{req.bench}: no official file matches these options")
    first = resolved[0]
    defaults: dict[str, str] = {}
    for r in resolved:
        defaults.update(r.option_defaults)
    return Resolved(first.path, first.source, tuple(p for r in resolved for p in r.roots), defaults,
                    tuple(r.source for r in resolved), first.local_files,
                    {f"{r.source.base_uri}/{p}": n for r in resolved for p, n in r.pending.items()},
                    tuple(n for r in resolved for n in r.notes), {u: n for r in resolved for u, n in r.unchecked.items()},
                    {f: v for r in resolved for f, v in r.indexes.items()})


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
