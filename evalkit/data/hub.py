"""Datasets on the Hugging Face Hub, through huggingface_hub (its resumable downloads, its cache under
`HF_HOME`, `HF_ENDPOINT` mirrors, `HF_TOKEN`, `HF_HUB_OFFLINE`), with the checks evalkit adds:

- the endpoint is probed first with a short timeout, so an unreachable Hub is one line in seconds
  (huggingface_hub retries a refused connection for ~20 s, logging each retry);
- the revision's metadata is asked first and a 401/403 is final, even when a copy is cached
  (huggingface_hub would fall back to its cache);
- files are fetched at the resolved commit and checked against the tree listing (the LFS sha256, or
  the git blob id), so the same command reads the same bytes or says why not; where the listing gives
  no hash (a mirror or proxy that drops them), by the sha256 recorded at the first download (pins.py);
- the listing is refused when its commit id is not 40 lower-case hex characters or a file name leads
  out of the dataset (`..`), before anything is written;
- every request has a timeout (hub_wire.py: `EVALKIT_HUB_TIMEOUT`), and a timeout is one line;
- each endpoint other than huggingface.co has a cache of its own, so a mirror's repository is never
  taken for huggingface.co's of the same name;
- files are loaded by their snapshot path (`snapshots/<commit>/…`, links into `blobs/`), never resolved.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import import_sdk
from evalkit.data.checksums import file_digest
from evalkit.data.hub_wire import TIMEOUT_VAR, Silent, hub_timeout, is_timeout, is_transport_error, quiet_hub
from evalkit.data.pins import add_pins, read_pins
from evalkit.data.source import COMMIT, HubRef

DEFAULT_ENDPOINT = "https://huggingface.co"
INDEX_FOLDER = "evalkit-index"  # in a repository's cache folder: the saved indexes of its big files
PROBE_TIMEOUT_S = 4.0
OFFER = "pass --data PATH for a local copy, or --data sample for the bundled sample"


class Unreachable(EvalkitError):
    """The endpoint did not answer: a cached copy may still serve (unlike a refusal, which is final)."""


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def host_slug(url: str) -> str:
    """A folder name for an endpoint: one cache per host, so a mirror's files are never another's."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", url.split("://", 1)[-1]).strip("_")


def cache_home(env: Mapping[str, str]) -> Path:
    """The user's cache folder (`XDG_CACHE_HOME`, else ~/.cache), under which both downloaders keep theirs."""
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@dataclass(frozen=True)
class HubEnv:
    """The Hub settings of one process, read once from its environment."""

    endpoint: str
    token: str | None
    offline: bool
    cache_dir: Path
    timeout: float = 30.0  # seconds a request may go without a byte (EVALKIT_HUB_TIMEOUT)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HubEnv:
        endpoint = (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        home = Path(env.get("HF_HOME") or cache_home(env) / "huggingface")
        base = Path(env.get("HF_HUB_CACHE") or home / "hub").expanduser()
        if endpoint != DEFAULT_ENDPOINT:  # a mirror's or a stand-in's repositories are not huggingface.co's
            base = base / "evalkit-endpoints" / host_slug(endpoint)
        return cls(endpoint, env.get("HF_TOKEN") or None, truthy(env.get("HF_HUB_OFFLINE")), base, hub_timeout(env))


@dataclass(frozen=True)
class RemoteFile:
    """One file as the Hub's listing names it: its git blob id and, for LFS files, the sha256."""

    path: str
    size: int
    blob_id: str
    sha256: str | None = None

    @property
    def etag(self) -> str:
        """The name huggingface_hub stores its bytes under in `blobs/`."""
        return self.sha256 or self.blob_id

    @property
    def listed(self) -> bool:
        """Whether the listing gives a hash of the file (a proxy may send names and sizes only)."""
        return bool(self.sha256 or self.blob_id)


@dataclass(frozen=True)
class Snapshot:
    """A revision resolved to its commit, with the listing (None when it was not asked: offline or pinned)."""

    ref: HubRef
    commit: str
    root: Path  # snapshots/<commit>
    listing: Mapping[str, RemoteFile] | None


@dataclass(frozen=True)
class Fetched:
    files: dict[str, Path]  # repository path -> its snapshot path (a link, never resolved)
    fresh: frozenset[str]  # the paths downloaded now (the rest were cached)
    unlisted: frozenset[str] = frozenset()  # the listing gives no hash: pinned by the first download's sha256
    sha256: Mapping[str, str] = field(default_factory=dict)  # the files read to check them: their sha256


def repo_folder(hub: HubEnv, repo: str) -> Path:
    return hub.cache_dir / f"datasets--{repo.replace('/', '--')}"


def why_unreachable(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the endpoint cannot be reached (None when a TCP connection opens), within `timeout` seconds
    including the name lookup."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)

    def connect() -> None:
        socket.create_connection((host, port), timeout=timeout).close()

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(connect).result(timeout=timeout)
        return None
    except FutureTimeout:
        return f"no answer within {timeout:.0f} s"
    except OSError as e:
        return e.strerror or type(e).__name__
    finally:
        pool.shutdown(wait=False)


def cached_commit(hub: HubEnv, ref: HubRef) -> str | None:
    """The commit the cache maps this revision to (a commit names itself), or None."""
    rev = ref.revision or "main"
    if COMMIT.fullmatch(rev):
        return rev
    ref_file = repo_folder(hub, ref.repo) / "refs" / rev
    try:
        commit = ref_file.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return commit if COMMIT.fullmatch(commit) else None


def _remember_ref(hub: HubEnv, ref: HubRef, commit: str) -> None:
    """Record branch -> commit as huggingface_hub's cache does, so HF_HUB_OFFLINE=1 finds it later."""
    rev = ref.revision or "main"
    if COMMIT.fullmatch(rev):
        return
    path = repo_folder(hub, ref.repo) / "refs" / rev
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(commit, encoding="utf-8")


def _http_status(e: BaseException) -> int | None:
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None)


def _hub_error(e: BaseException, ref: HubRef, hub: HubEnv) -> EvalkitError:
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    where = f"{ref.uri} at {hub.endpoint}"
    status = _http_status(e)
    if status in (401, 403):
        if hub.token:
            return EvalkitError(f"{where}: HF_TOKEN was refused (HTTP {status}): use a token with access to "
                                f"this dataset (accept its terms on the Hub first if it is gated)")
        return EvalkitError(f"{where}: the Hub asks for a token (HTTP {status}): set HF_TOKEN to a token with "
                            f"access to this dataset (accept its terms on the Hub first if it is gated)")
    if isinstance(e, RevisionNotFoundError):
        return EvalkitError(f"{where}: no revision '{ref.revision}' in this dataset")
    if isinstance(e, RepositoryNotFoundError) or status == 404:
        return EvalkitError(f"{where}: no such dataset (or it is private: set HF_TOKEN)")
    reason = f"HTTP {status}" if status else (str(e).splitlines()[0] if str(e) else type(e).__name__)
    return EvalkitError(f"{where}: {reason[:200]}; {OFFER}")


def listing_url(ref: HubRef, hub: HubEnv) -> str:
    return f"{hub.endpoint}/api/datasets/{ref.repo}/revision/{quote(ref.revision or 'main', safe='')}"


def _outside(name: object) -> bool:
    """A listed file name that is no plain relative path inside the dataset."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return True
    return any(part in ("..", "") for part in name.split("/")) or any(ord(c) < 32 for c in name)


def resolve_remote(ref: HubRef, hub: HubEnv) -> Snapshot:
    """Ask the Hub which commit the revision names and what it holds (one metadata request, within the
    timeout); a 401/403 is final here, whatever the cache holds. A commit id that is not one, or a file
    name leading out of the dataset, refuses the listing before anything is written."""
    reason = why_unreachable(hub.endpoint)
    if reason is not None:
        raise Unreachable(f"cannot reach {hub.endpoint} for {ref.uri} ({reason}); {OFFER}")
    with quiet_hub():
        import_sdk("huggingface_hub", ref.uri)
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError

        api = HfApi(endpoint=hub.endpoint, token=hub.token or None)
        try:
            # with a revision: the bare repository page stays public for gated sets, its revisions do not
            info = api.dataset_info(ref.repo, revision=ref.revision or "main", files_metadata=True,
                                    timeout=hub.timeout)
        except (HfHubHTTPError, OSError) as e:
            if is_timeout(e):
                raise _silent(ref, hub, "the metadata request") from None
            raise _hub_error(e, ref, hub) from None
        except Exception as e:
            if is_timeout(e):
                raise _silent(ref, hub, "the metadata request") from None
            if is_transport_error(e):
                raise _hub_error(e, ref, hub) from None
            raise
    commit = info.sha
    if not isinstance(commit, str) or not COMMIT.fullmatch(commit):
        raise EvalkitError(f"{listing_url(ref, hub)}: the commit id {str(commit)[:60]!r} is not 40 lower-case hex "
                           f"characters; refused, nothing was written")
    listing = {}
    for s in info.siblings or []:
        if _outside(s.rfilename):
            raise EvalkitError(f"{listing_url(ref, hub)}: the listing names a file outside the dataset "
                               f"({str(s.rfilename)[:120]!r}); refused, nothing was downloaded")
        lfs = s.lfs
        listing[s.rfilename] = RemoteFile(s.rfilename, int(s.size or (lfs.size if lfs else 0) or 0), str(s.blob_id or ""),
                                          lfs.sha256 if lfs else None)
    return Snapshot(ref, commit, repo_folder(hub, ref.repo) / "snapshots" / commit, listing)


def _silent(ref: HubRef, hub: HubEnv, what: str, path: str | None = None) -> EvalkitError:
    where = f"{ref.uri}: {path}" if path else ref.uri
    again = "nothing of the file was kept; run again, or " if path else ""
    return EvalkitError(f"{where}: {what} had no answer from {hub.endpoint} within {hub.timeout:g} s "
                        f"({TIMEOUT_VAR} sets it); {again}{OFFER}")


def local_snapshot(ref: HubRef, hub: HubEnv, why: str) -> Snapshot:
    """The cached snapshot of this revision, asking nothing (HF_HUB_OFFLINE=1 or a commit pin)."""
    commit = cached_commit(hub, ref)
    root = repo_folder(hub, ref.repo) / "snapshots" / (commit or "")
    if commit is None or not root.is_dir():
        raise EvalkitError(f"{ref.uri} is not in the Hub cache {hub.cache_dir} and {why}; run once with the "
                           f"network (or `evalkit data pull`) first, or {OFFER}")
    return Snapshot(ref, commit, root, None)


def select(snapshot: Snapshot, wanted: Iterable[str]) -> list[str]:
    """Repository paths to read: each wanted path is a file, or a folder ending in "/" (every file
    under it), or "" (the whole repository). Offline, the listing is the snapshot folder itself."""
    names = sorted(snapshot.listing) if snapshot.listing is not None else sorted(
        p.relative_to(snapshot.root).as_posix() for p in snapshot.root.rglob("*") if not p.is_dir())
    out: list[str] = []
    for want in wanted:
        if want in ("", "/"):
            hits = names
        elif want.endswith("/"):
            hits = [n for n in names if n.startswith(want)]
        else:
            hits = [n for n in names if n == want] or [n for n in names if n.startswith(want + "/")]
        if not hits:
            raise EvalkitError(f"{snapshot.ref.uri}@{snapshot.commit[:12]}: no file '{want}' in the dataset")
        out += [h for h in hits if h not in out and not h.startswith(".git")]
    return out


def _check_space(hub: HubEnv, need: int) -> None:
    folder = hub.cache_dir
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if need > free:
        raise EvalkitError(f"the download needs {need / 1e9:.2f} GB in {hub.cache_dir} but {free / 1e9:.2f} GB are "
                           f"free; free some space or set HF_HUB_CACHE to a larger disk")


def fetch(snapshot: Snapshot, paths: list[str], hub: HubEnv,
          progress: Callable[[int], Any] | None = None, bar: type | None = None) -> Fetched:
    """Each path's snapshot file, downloading what is missing (at the commit: never a moved branch) and
    checking each new download against the listing; a bad one is removed and named. A file the listing
    gives no hash of is checked against the sha256 recorded when it was first downloaded (recorded
    then), and so is any file with such a record read without a listing (offline, a cached pin)."""
    out: dict[str, Path] = {}
    missing = [p for p in paths if not (snapshot.root / p).is_file()]
    if missing and snapshot.listing is None:
        raise EvalkitError(f"{snapshot.ref.uri}@{snapshot.commit[:12]}: {missing[0]} is not in the Hub cache "
                           f"({len(missing)} files missing) and nothing may be asked (HF_HUB_OFFLINE=1); {OFFER}")
    if missing:
        assert snapshot.listing is not None
        _check_space(hub, sum(snapshot.listing[p].size for p in missing if p in snapshot.listing))
    folder = repo_folder(hub, snapshot.ref.repo)
    pins = read_pins(folder, snapshot.commit)
    listing = snapshot.listing
    unlisted = frozenset(p for p in paths if listing is not None and p in listing and not listing[p].listed)
    hashed: dict[str, str] = {}
    for p in paths:
        local = snapshot.root / p
        if p in missing:
            local = Path(_download(snapshot, p, hub, bar))
            if p not in unlisted:
                _verify_download(snapshot, p, local)
            if progress is not None:
                progress(listing[p].size if listing and p in listing else 0)
        elif listing is not None and p in listing and p not in unlisted:
            _verify_cached(snapshot, p, local)
        if p in unlisted or p in pins:
            hashed[p] = _check_pin(snapshot, p, local, pins.get(p), fresh=p in missing)
        out[p] = local
    add_pins(folder, snapshot.commit, {p: hashed[p] for p in unlisted if p not in pins})
    if listing is not None:
        _remember_ref(hub, snapshot.ref, snapshot.commit)
    return Fetched(out, frozenset(missing), unlisted, hashed)


def _check_pin(snapshot: Snapshot, path: str, local: Path, pinned: str | None, *, fresh: bool) -> str:
    """The file's sha256, refused when it differs from the one recorded at its first download."""
    found = file_digest(local, "sha256")
    if pinned is not None and found != pinned:
        if fresh:
            drop_download(local)
        what = "the file was removed" if fresh else f"delete {local} to download it again"
        raise EvalkitError(f"{snapshot.ref.uri}@{snapshot.commit[:12]}: {path}: sha256 {found} is not the {pinned} "
                           f"recorded at its first download (the endpoint lists no hashes); {what}")
    return found


def _download(snapshot: Snapshot, path: str, hub: HubEnv, bar: type | None) -> str:
    """One file at the snapshot's commit, through huggingface_hub (resumable, into its cache); a request
    without an answer for the timeout ends it in one line."""
    with quiet_hub(hub.timeout):
        import_sdk("huggingface_hub", snapshot.ref.uri)
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import HfHubHTTPError

        try:
            return str(hf_hub_download(snapshot.ref.repo, path, repo_type="dataset", revision=snapshot.commit,
                                       cache_dir=str(hub.cache_dir), endpoint=hub.endpoint,
                                       token=hub.token or None, tqdm_class=bar, etag_timeout=hub.timeout))
        except Silent:
            raise _silent(snapshot.ref, hub, "the download", path) from None
        except (HfHubHTTPError, OSError) as e:
            if is_timeout(e):
                raise _silent(snapshot.ref, hub, "the download", path) from None
            raise _hub_error(e, snapshot.ref, hub) from None
        except Exception as e:
            if is_timeout(e):
                raise _silent(snapshot.ref, hub, "the download", path) from None
            if is_transport_error(e):
                raise _hub_error(e, snapshot.ref, hub) from None
            raise


def _verify_download(snapshot: Snapshot, path: str, local: Path) -> None:
    assert snapshot.listing is not None
    remote = snapshot.listing.get(path)
    if remote is None:
        return
    found = file_digest(local, "sha256") if remote.sha256 else file_digest(local, "git")
    want = remote.sha256 or remote.blob_id
    if want and found != want:
        drop_download(local)
        kind = "sha256" if remote.sha256 else "git blob id"
        raise EvalkitError(f"{snapshot.ref.uri}@{snapshot.commit[:12]}: {path}: {kind} {found} does not match the "
                           f"Hub's listing {want}; the file was removed")


def _verify_cached(snapshot: Snapshot, path: str, local: Path) -> None:
    """A cached file is checked by its blob name (huggingface_hub names blobs by their etag): no read."""
    assert snapshot.listing is not None
    remote = snapshot.listing[path]
    if local.is_symlink() and os.path.basename(os.readlink(local)) not in (remote.etag, ""):
        raise EvalkitError(f"{snapshot.ref.uri}@{snapshot.commit[:12]}: {path}: the cached copy "
                           f"({os.path.basename(os.readlink(local))}) is not the Hub's ({remote.etag}); "
                           f"delete {local} and run again")


def drop_download(local: Path) -> None:
    """Remove a download that failed its check: the snapshot link and the blob it points to."""
    target = Path(os.path.realpath(local))
    for p in (local, target):
        with contextlib.suppress(OSError):
            p.unlink()
