"""Local stand-ins for the Hugging Face Hub (dataset repos) and raw.githubusercontent.com.

Tests never touch the network: these aiohttp servers run in a background thread on 127.0.0.1 (a
random port each) and answer the way the real services do, so the REAL client code (huggingface_hub
2.x, or any HTTP client) runs unchanged against them.

HubStandin speaks the subset of the Hub's protocol huggingface_hub 2.4 uses for dataset repos:

- ``GET /api/datasets/{repo}[/revision/{rev}][?blobs=true]``: ``dataset_info`` / ``repo_info``
  (``snapshot_download`` calls it to resolve a branch to a commit). ``siblings`` carry ``size``,
  ``blobId`` and ``lfs`` only with ``blobs=true`` (``files_metadata=True``), as on the Hub.
- ``GET /api/datasets/{repo}/tree/{rev}[/{path}]?recursive=&cursor=``: ``list_repo_tree``, paged by
  a ``Link: <...>; rel="next"`` header (1000 entries a page, 50 with ``expand``; ``page_size=``).
- ``HEAD``/``GET /datasets/{repo}/resolve/{rev}/{path}``: ``hf_hub_download`` / ``snapshot_download``.
  Headers ``X-Repo-Commit``, a quoted ``ETag`` (the git blob id, or the sha256 for LFS files, which
  also get ``X-Linked-Etag`` / ``X-Linked-Size``), ``Content-Length``, ``Accept-Ranges`` and 206
  answers to ``Range``. No ``X-Xet-*`` header is ever sent, so huggingface_hub downloads over plain
  HTTP even with hf_xet installed. With ``lfs_redirect=True`` LFS files answer 302 to a second
  origin (a CDN stand-in on another port), which huggingface_hub does not follow on HEAD and reaches
  without the Authorization header, as with the Hub's CDN.
- Errors as huggingface_hub maps them (``X-Error-Code`` header): unknown repo 401 (anonymous) / 404
  RepoNotFound -> RepositoryNotFoundError; gated repo 401 (anonymous) / 403 (another account's token)
  GatedRepo -> GatedRepoError; unknown revision 404 RevisionNotFound; missing file 404 EntryNotFound
  with ``X-Repo-Commit`` (huggingface_hub caches the absence under ``.no_exist``).

LFS files are modelled as on the Hub: their git ``oid`` / ``blobId`` is the blob id of the LFS
pointer file, their ``size`` the real size, ``lfs`` gives the sha256 and the pointer's size.

What a caller must do. huggingface_hub reads ``HF_ENDPOINT``, ``HF_HOME``, ``HF_HUB_CACHE``,
``HF_TOKEN_PATH`` and ``HF_HUB_OFFLINE`` once, when it is imported, so ``monkeypatch.setenv`` is too
late in-process. Either pass ``endpoint=hub.url``, ``cache_dir=`` and ``token=`` to every call, or
call ``hub.activate(monkeypatch, tmp_path)``, which patches ``huggingface_hub.constants`` (and sets
the environment for child processes that import huggingface_hub afresh) and drops ``HF_TOKEN``, so a
developer's real token is never sent. ``scan_cache_dir()`` keeps the import-time cache default, so
give it ``cache_dir=`` too. Passing ``endpoint=`` alone is not enough: unless
``constants.HF_HUB_DISABLE_TELEMETRY`` is true, the first User-Agent huggingface_hub builds in a process
fetches ``{constants.ENDPOINT}/api/agent-harnesses`` (3 s timeout, cached in HF_HOME for a day), i.e.
reaches for huggingface.co; ``activate`` disables telemetry (and the stand-in answers that path with an
empty registry anyway). huggingface_hub keeps one shared httpx client with pooled connections:
stopping a stand-in mid-test makes the next call reconnect, which is what a closed port should do.

GitFilesStandin (git_standin.py) serves ``GET``/``HEAD /{owner}/{repo}/{commit-or-branch}/{path}`` like
raw.githubusercontent.com (text/plain, a quoted sha256 ``ETag``, Range -> 206, ``404: Not Found``).

Both record every request (``log``: Hit records; ``requests``: (method, path, Range) tuples) before
answering, so once a client call has returned its requests are already visible: no waiting needed.
``interrupt_next(repo, path, after=n)`` makes the next body-carrying GET of a file announce its full
length but close the connection after n bytes, to exercise resumed downloads.

What a mirror, a proxy or a hostile Hub does instead (``no_hashes=True``, ``hold_metadata()``,
``stall()``, ``show_commit()``, a file name holding ``..``): hub_faults.py.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aiohttp import web

if TYPE_CHECKING:
    import pytest

from hub_faults import HubFaults
from standin_base import (
    Hit,
    _Blob,
    _Commit,
    _decode_cursor,
    _encode_cursor,
    _iso,
    _local_port,
    _Repo,
    _Standin,
    _tree_id,
    record_commit,
)


class HubStandin(HubFaults, _Standin):
    """A Hugging Face Hub serving dataset repos from memory; see the module docstring for the protocol."""

    def __init__(self, *, token: str = "hf_standin_token", page_size: int = 1000,
                 lfs_redirect: bool = False, no_hashes: bool = False) -> None:
        super().__init__()
        self.token = token
        self.page_size = page_size
        self.lfs_redirect = lfs_redirect
        self.no_hashes = no_hashes
        self._repos: dict[str, _Repo] = {}

    def _sites(self) -> int:
        return 2 if self.lfs_redirect else 1

    @property
    def cdn_url(self) -> str:
        """The LFS CDN's origin (a different port, so huggingface_hub treats it as off-Hub)."""
        if len(self._ports) < 2:
            raise RuntimeError("the CDN exists with lfs_redirect=True once started")
        return f"http://127.0.0.1:{self._ports[1]}"

    # repos -------------------------------------------------------------------------------------

    def add_commit(self, repo: str, files: Mapping[str, bytes], *, lfs: Iterable[str] = (),
                   branch: str = "main") -> str:
        """A commit holding exactly these files (a full snapshot); the branch moves to it, older commits stay
        reachable by sha. Files named in ``lfs`` are stored as LFS files. Returns the 40-hex commit sha."""
        lfs = set(lfs)
        if unknown := lfs - set(files):
            raise ValueError(f"lfs names files not in the commit: {sorted(unknown)}")
        blobs = {path.strip("/"): _Blob.of(bytes(data), path in lfs) for path, data in files.items()}
        with self._lock:
            return record_commit(self._repos, repo, blobs, branch)

    def head(self, repo: str, branch: str = "main") -> str:
        """The commit a branch points at."""
        with self._lock:
            return self._repos[repo].branches[branch]

    def gate(self, repo: str, gated: bool = True) -> None:
        """Gated: without ``Authorization: Bearer <hub.token>`` the repo's revisions, trees and files answer
        401 GatedRepo, with another token 403 GatedRepo (an account not granted access). ``GET
        /api/datasets/{repo}`` (no revision) stays public and says ``gated: "auto"``, as on the Hub."""
        with self._lock:
            self._repos.setdefault(repo, _Repo()).gated = gated

    def activate(self, monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
        """Point huggingface_hub at this stand-in with a private HF_HOME and no token of the developer's:
        patches the import-time constants in-process and sets the environment for child processes.
        Returns the hub cache directory (``home / "hub"``)."""
        from huggingface_hub import constants

        cache = home / "hub"
        env = {"HF_ENDPOINT": self.url, "HF_HOME": str(home), "HF_HUB_CACHE": str(cache),
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_HUB_OFFLINE",
                     "TRANSFORMERS_OFFLINE", "HF_TOKEN_PATH", "HUGGINGFACE_HUB_CACHE", "HUGGINGFACE_CO_STAGING"):
            monkeypatch.delenv(name, raising=False)
        patched: dict[str, Any] = {
            "ENDPOINT": self.url,
            "HUGGINGFACE_CO_URL_TEMPLATE": self.url + "/{repo_id}/resolve/{revision}/{filename}",
            "HF_HOME": str(home), "HF_HUB_CACHE": str(cache), "HUGGINGFACE_HUB_CACHE": str(cache),
            "HF_TOKEN_PATH": str(home / "token"), "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
            "AGENT_HARNESSES_PATH": str(home / ".agent_harnesses.json"),
            "HF_HUB_OFFLINE": False, "HF_HUB_DISABLE_TELEMETRY": True,
        }
        for name, value in patched.items():
            monkeypatch.setattr(constants, name, value)
        return cache

    # protocol ----------------------------------------------------------------------------------

    async def _route(self, request: web.Request, hit: Hit) -> web.StreamResponse:
        segs = request.raw_path.split("?", 1)[0].lstrip("/").split("/")
        if len(self._ports) > 1 and _local_port(request) == self._ports[1]:
            return await self._cdn(request, hit, segs)
        if segs == ["api", "agent-harnesses"]:  # huggingface_hub's agent detection: nothing to detect
            return web.json_response({"standardEnvVars": [], "harnesses": {}})
        if segs[:2] == ["api", "datasets"]:
            return await self._api(request, hit, segs[2:])
        if segs[0] == "datasets":
            return await self._resolve(request, hit, segs[1:])
        if segs[0] == "api" and len(segs) > 2 and segs[1] in ("models", "spaces"):
            return self._repo_not_found(request, unquote("/".join(segs[2:4])))
        return web.Response(status=404, text="Not Found")

    def _split_repo(self, rest: list[str], keywords: tuple[str, ...]) -> tuple[str, _Repo | None, list[str]]:
        """(repo id, repo, what follows it): repo ids are ``name`` or ``namespace/name``."""
        with self._lock:
            for n in (2, 1):
                repo_id = unquote("/".join(rest[:n]))
                if len(rest) >= n and repo_id in self._repos:
                    return repo_id, self._repos[repo_id], rest[n:]
        n = 1 if len(rest) > 1 and rest[1] in keywords else 2
        return unquote("/".join(rest[:n])), None, rest[n:]

    def _error(self, request: web.Request, status: int, code: str | None, message: str,
               commit: str | None = None) -> web.Response:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if commit:
            headers["X-Repo-Commit"] = commit
        return web.json_response({"error": message}, status=status, headers=headers)

    def _repo_not_found(self, request: web.Request, repo_id: str) -> web.Response:
        status = 404 if "Authorization" in request.headers else 401
        return self._error(request, status, "RepoNotFound", "Repository not found")

    def _refusal(self, request: web.Request, repo_id: str, repo: _Repo | None) -> web.Response | None:
        """The answer when the caller may not see this repo's contents, else None."""
        if repo is None or not repo.commits:
            return self._repo_not_found(request, repo_id)
        if not repo.gated:
            return None
        auth = request.headers.get("Authorization")
        if auth is None:
            return self._error(request, 401, "GatedRepo", f"Access to dataset {repo_id} is restricted. You must "
                               "have access to it and be authenticated to access it. Please log in.")
        if auth != f"Bearer {self.token}":
            return self._error(request, 403, "GatedRepo", f"Access to dataset {repo_id} is restricted and you are "
                               f"not in the authorized list. Visit {self.url}/datasets/{repo_id} to ask for access.")
        return None

    def _commit(self, request: web.Request, repo: _Repo, rev: str) -> _Commit | web.Response:
        with self._lock:
            if rev in self._shown.values():
                rev = "main"
            commit = repo.resolve(rev)
        if commit is None:
            return self._error(request, 404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return commit

    async def _api(self, request: web.Request, hit: Hit, rest: list[str]) -> web.StreamResponse:
        repo_id, repo, tail = self._split_repo(rest, ("revision", "tree"))
        if request.method != "GET":
            return web.Response(status=405, text="Method Not Allowed")
        if self._holds_metadata():
            await self._hold(self.metadata_held)
        if not tail and repo is not None and repo.commits:  # public even when gated, as on the Hub
            return self._info(request, repo_id, repo, "main")
        if refusal := self._refusal(request, repo_id, repo):
            return refusal
        assert repo is not None
        if len(tail) == 2 and tail[0] == "revision":
            return self._info(request, repo_id, repo, unquote(tail[1]))
        if len(tail) >= 2 and tail[0] == "tree":
            return self._tree(request, repo, unquote(tail[1]), unquote("/".join(tail[2:])).strip("/"))
        return web.Response(status=404, text="Not Found")

    def _info(self, request: web.Request, repo_id: str, repo: _Repo, rev: str) -> web.Response:
        commit = self._commit(request, repo, rev)
        if isinstance(commit, web.Response):
            return commit
        blobs = request.query.get("blobs", "").lower() in ("1", "true")
        siblings: list[dict[str, Any]] = []
        for path in sorted(commit.files):
            blob = commit.files[path]
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs and self.no_hashes:
                sibling.update(size=len(blob.data))
            elif blobs:
                sibling.update(size=len(blob.data), blobId=blob.oid)
                if blob.lfs:
                    sibling["lfs"] = {"sha256": blob.sha256, "size": len(blob.data),
                                      "pointerSize": blob.pointer_size}
            siblings.append(sibling)
        return web.json_response({
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24], "id": repo_id,
            "author": repo_id.split("/")[0] if "/" in repo_id else None,
            "sha": self._shown.get(repo_id, commit.sha),
            "lastModified": _iso(commit.when), "createdAt": _iso(repo.created), "private": False,
            "gated": "auto" if repo.gated else False, "disabled": False, "downloads": 0, "likes": 0,
            "tags": [], "cardData": {}, "siblings": siblings,
            "usedStorage": sum(len(b.data) for c in repo.commits.values() for b in c.files.values()),
        })

    def _tree(self, request: web.Request, repo: _Repo, rev: str, prefix: str) -> web.Response:
        commit = self._commit(request, repo, rev)
        if isinstance(commit, web.Response):
            return commit
        files = commit.files
        dirs: set[str] = set()
        for path in files:
            parts = path.split("/")
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
        if prefix and prefix not in dirs:
            return self._error(request, 404, "EntryNotFound", f"{prefix} does not exist on \"{rev}\"",
                               commit=commit.sha)
        recursive = request.query.get("recursive", "").lower() in ("1", "true")
        under = f"{prefix}/" if prefix else ""

        def listed(path: str) -> bool:
            return path.startswith(under) and (recursive or "/" not in path[len(under):])

        entries: list[dict[str, Any]] = []
        for d in sorted(d for d in dirs if listed(d)):
            entries.append({"type": "directory", "oid": _tree_id(files, d), "size": 0, "path": d})
        for path in sorted(p for p in files if listed(p)):
            blob = files[path]
            entry: dict[str, Any] = {"type": "file", "oid": blob.oid, "size": len(blob.data), "path": path}
            if blob.lfs:
                entry["lfs"] = {"oid": blob.sha256, "size": len(blob.data), "pointerSize": blob.pointer_size}
            entries.append(entry)
        size = 50 if request.query.get("expand", "").lower() in ("1", "true") else self.page_size
        start = _decode_cursor(request.query.get("cursor"))
        page, headers = entries[start:start + size], {}
        if start + size < len(entries):
            nxt = request.url.update_query(cursor=_encode_cursor(start + size))
            headers["Link"] = f'<{nxt}>; rel="next"'
        return web.json_response(page, headers=headers)

    async def _resolve(self, request: web.Request, hit: Hit, rest: list[str]) -> web.StreamResponse:
        repo_id, repo, tail = self._split_repo(rest, ("resolve",))
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="Method Not Allowed")
        if not tail or tail[0] != "resolve" or len(tail) < 3:
            return web.Response(status=404, text="Not Found")
        if refusal := self._refusal(request, repo_id, repo):
            return refusal
        assert repo is not None
        commit = self._commit(request, repo, unquote(tail[1]))
        if isinstance(commit, web.Response):
            return commit
        path = unquote("/".join(tail[2:]))
        hit.file = path
        blob = commit.files.get(path)
        if blob is None:
            return self._error(request, 404, "EntryNotFound", "Entry not found", commit=commit.sha)
        headers = {"X-Repo-Commit": self._shown.get(repo_id, commit.sha), "ETag": blob.etag,
                   "Content-Type": "application/octet-stream"}
        if self.no_hashes:  # a proxy's own ETag, no hash of the content
            headers["ETag"] = f'"{zlib.crc32(blob.data):08x}-{len(blob.data):x}"'
        elif blob.lfs:
            headers.update({"X-Linked-Etag": blob.etag, "X-Linked-Size": str(len(blob.data))})
            if self.lfs_redirect:
                headers["Location"] = f"{self.cdn_url}/{repo_id}/{blob.sha256}?path={path}"
                return web.Response(status=302, headers=headers)
        with self._lock:
            after = self._stalls.get((repo_id, path))
        if after is not None and request.method == "GET":
            return await self._stalled_body(request, hit, blob.data, after, headers)
        return await self._send_file(request, hit, repo_id, path, blob.data, headers)

    async def _cdn(self, request: web.Request, hit: Hit, segs: list[str]) -> web.StreamResponse:
        """``/{repo}/{sha256}``: LFS content by hash, no authorization (the Hub's URLs are signed instead)."""
        if request.method not in ("GET", "HEAD") or len(segs) < 2:
            return web.Response(status=404, text="Not Found")
        repo_id, sha256 = unquote("/".join(segs[:-1])), segs[-1]
        with self._lock:
            repo = self._repos.get(repo_id)
            found = [(p, b) for c in (repo.commits.values() if repo else ()) for p, b in c.files.items()
                     if b.lfs and b.sha256 == sha256]
        if not found:
            return web.Response(status=404, text="NoSuchKey")
        path = request.query.get("path", found[0][0])
        headers = {"ETag": f'"{sha256}"', "Content-Type": "application/octet-stream"}
        return await self._send_file(request, hit, repo_id, path, found[0][1].data, headers)
