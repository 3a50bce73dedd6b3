"""Files of a GitHub repository at a commit (a benchmark's question file, a third-party mirror of its
release): the only downloader in evalkit besides huggingface_hub's. One small resumable aiohttp helper:
the tree listing names every file's git blob id, each file is fetched from the raw host at the commit
(resumed with Range after an interruption) and checked against its blob id before it is kept.

Cache: `$EVALKIT_DATA_CACHE` (default ~/.cache/evalkit/data)/github/<host>/<owner>/<repo>/<commit>/.
`EVALKIT_GITHUB_API` / `EVALKIT_GITHUB_RAW` point at a mirror (or a test's stand-in); `GITHUB_TOKEN`
(optional) lifts the API's anonymous rate limit and is never written anywhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalkit.core.errors import EvalkitError
from evalkit.data.checksums import file_digest
from evalkit.data.hub import OFFER, cache_home, host_slug, truthy, why_unreachable
from evalkit.data.lock import check_against, lock_key
from evalkit.data.registry import RegistryFile, RegistrySource
from evalkit.data.request import DataRequest, Resolved, load_lock
from evalkit.data.source import COMMIT, DataSource

GITHUB_API = "https://api.github.com"
GITHUB_RAW = "https://raw.githubusercontent.com"
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class GitEnv:
    api: str
    raw: str
    token: str | None
    cache_dir: Path
    offline: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GitEnv:
        api = (env.get("EVALKIT_GITHUB_API") or GITHUB_API).rstrip("/")
        raw = (env.get("EVALKIT_GITHUB_RAW") or GITHUB_RAW).rstrip("/")
        base = Path(env.get("EVALKIT_DATA_CACHE") or cache_home(env) / "evalkit" / "data").expanduser()
        offline = truthy(env.get("HF_HUB_OFFLINE"))
        return cls(api, raw, env.get("GITHUB_TOKEN") or None, base / "github" / host_slug(raw), offline)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@dataclass(frozen=True)
class Tree:
    commit: str
    blobs: Mapping[str, tuple[str, int]]  # path -> (git blob id, size)


def _run(coro_factory: Callable[[], Any]) -> Any:
    """Run a coroutine to completion from sync code, also when the caller is inside an event loop."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro_factory())
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="evalkit-archive")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


async def _get_json(session: Any, url: str, what: str) -> Any:
    async with session.get(url) as r:
        if r.status in (401, 403):
            raise EvalkitError(f"{what}: HTTP {r.status} from {url.split('?')[0]} (set GITHUB_TOKEN if the "
                               f"anonymous rate limit was reached)")
        if r.status == 404:
            raise EvalkitError(f"{what}: not found at {url.split('?')[0]}")
        if r.status != 200:
            raise EvalkitError(f"{what}: HTTP {r.status} from {url.split('?')[0]}; {OFFER}")
        return json.loads(await r.read())


async def _tree(git: GitEnv, repo: str, revision: str) -> Tree:
    import aiohttp

    async with aiohttp.ClientSession(headers=git.headers(), timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as s:
        commit = revision
        if not COMMIT.fullmatch(revision):
            info = await _get_json(s, f"{git.api}/repos/{repo}/commits/{revision}", f"github:{repo}@{revision}")
            commit = str(info.get("sha", ""))
        raw = await _get_json(s, f"{git.api}/repos/{repo}/git/trees/{commit}?recursive=1", f"github:{repo}@{commit[:12]}")
    blobs = {str(e["path"]): (str(e["sha"]), int(e.get("size") or 0)) for e in raw.get("tree", [])
             if e.get("type") == "blob"}
    return Tree(commit, blobs)


async def _download(git: GitEnv, repo: str, commit: str, paths: list[str], tree: Tree, root: Path,
                    advance: Callable[[int], None] | None) -> None:
    import aiohttp

    async with aiohttp.ClientSession(headers=git.headers(), timeout=aiohttp.ClientTimeout(total=None,
                                                                                          sock_read=TIMEOUT_S)) as s:
        for p in paths:
            dest = root / p
            part = dest.with_name(dest.name + ".part")
            dest.parent.mkdir(parents=True, exist_ok=True)
            have = part.stat().st_size if part.exists() else 0
            headers = {"Range": f"bytes={have}-"} if have else {}
            url = f"{git.raw}/{repo}/{commit}/{quote(p)}"
            async with s.get(url, headers=headers) as r:
                if r.status not in (200, 206):
                    raise EvalkitError(f"github:{repo}@{commit[:12]}: {p}: HTTP {r.status} from {git.raw}; {OFFER}")
                mode = "ab" if r.status == 206 else "wb"  # a server that ignores Range sends it all again
                if advance and r.status == 206:
                    advance(have)
                with open(part, mode) as f:
                    async for chunk in r.content.iter_chunked(1 << 16):
                        f.write(chunk)
                        if advance:
                            advance(len(chunk))
            want = tree.blobs[p][0]
            found = file_digest(part, "git")
            if found != want:
                part.unlink()
                raise EvalkitError(f"github:{repo}@{commit[:12]}: {p}: git blob id {found} does not match the "
                                   f"repository's {want}; the file was removed and nothing was asked")
            os.replace(part, dest)


def _select(names: list[str], wanted: list[str], where: str) -> list[str]:
    out: list[str] = []
    for want in wanted:
        hits = names if want in ("", "/") else [n for n in names if n == want or n.startswith(want.rstrip("/") + "/")]
        if not hits:
            raise EvalkitError(f"{where}: no file '{want}' in the repository")
        out += [h for h in hits if h not in out]
    return out


def fetch_git(repo: str, revision: str, wanted: list[str], env: Mapping[str, str],
              progress: Callable[[str, int], Callable[[int], None] | None] | None = None,
              plan_only: bool = False) -> tuple[str, Path, dict[str, Path], dict[str, int]]:
    """(commit, the commit's cache folder, path -> local file, path -> bytes still to download) for the
    wanted files of repo@revision; `plan_only` downloads nothing (the files are those already cached)."""
    git = GitEnv.from_env(env)
    repo_dir = git.cache_dir / repo
    ref_file = repo_dir / "refs" / revision
    cached_commit = revision if COMMIT.fullmatch(revision) else (
        ref_file.read_text(encoding="utf-8").strip() if ref_file.is_file() else None)
    listing_file = repo_dir / "trees" / f"{cached_commit}.json" if cached_commit else None
    tree: Tree | None = None
    if cached_commit and listing_file and listing_file.is_file() and (git.offline or COMMIT.fullmatch(revision)):
        tree = Tree(cached_commit, {k: tuple(v) for k, v in json.loads(listing_file.read_text()).items()})
    if tree is None:
        reason = why_unreachable(git.api)
        if reason is not None:
            if cached_commit and listing_file and listing_file.is_file():  # unreachable: what is cached still reads
                tree = Tree(cached_commit, {k: tuple(v) for k, v in json.loads(listing_file.read_text()).items()})
            else:
                raise EvalkitError(f"cannot reach {git.api} for github:{repo}@{revision} ({reason}); {OFFER}")
        else:
            tree = _run(lambda: _tree(git, repo, revision))
    assert tree is not None
    root = repo_dir / tree.commit
    paths = _select(sorted(tree.blobs), wanted, f"github:{repo}@{tree.commit[:12]}")
    missing = [p for p in paths if not (root / p).is_file()]
    if plan_only:
        return tree.commit, root, {p: root / p for p in paths if p not in missing}, {p: tree.blobs[p][1] for p in missing}
    if missing:
        need = sum(tree.blobs[p][1] for p in missing)
        repo_dir.mkdir(parents=True, exist_ok=True)
        if need > shutil.disk_usage(repo_dir).free:
            raise EvalkitError(f"the download needs {need / 1e9:.2f} GB in {repo_dir}: not enough free space")
        advance = progress(f"github:{repo}", need) if progress else None
        _run(lambda: _download(git, repo, tree.commit, missing, tree, root, advance))
    _save_tree(repo_dir, revision, tree)
    return tree.commit, root, {p: root / p for p in paths}, {}


def _save_tree(repo_dir: Path, revision: str, tree: Tree) -> None:
    (repo_dir / "trees").mkdir(parents=True, exist_ok=True)
    listing = repo_dir / "trees" / f"{tree.commit}.json"
    if not listing.is_file():
        listing.write_text(json.dumps({k: list(v) for k, v in tree.blobs.items()}), encoding="utf-8")
    if not COMMIT.fullmatch(revision):
        (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
        (repo_dir / "refs" / revision).write_text(tree.commit, encoding="utf-8")


def read_git(entry: RegistrySource, wanted: tuple[RegistryFile, ...], req: DataRequest) -> Resolved:
    """A registry entry of kind "git", as what the benchmark loads."""
    lock = load_lock(req)
    base = f"https://github.com/{entry.repo}"
    key = lock_key("archive", base, None)
    pinned = lock.pinned(key) if lock is not None else None
    revision = pinned.commit if pinned is not None and pinned.commit else entry.revision
    commit, root, files, pending = fetch_git(entry.repo, revision, [f.path for f in wanted], req.env,
                                             req.progress, req.plan_only)
    sums = {p: file_digest(local, "sha256") for p, local in files.items()}
    if lock is not None:
        check_against(lock, key, sums)
    folder = root / entry.root if entry.root else root
    source = DataSource("archive", f"{base}/tree/{commit}", None, entry.revision, commit, sums)
    return Resolved(folder, source, option_defaults=entry.fills(folder), local_files=tuple(files.values()),
                    pending=pending)
