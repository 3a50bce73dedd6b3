"""A stand-in for raw.githubusercontent.com and the two GitHub API calls evalkit's archive fetcher makes
(a branch's commit, a commit's recursive tree); see hub_standin.py's docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote

from aiohttp import web

if TYPE_CHECKING:
    pass

from standin_base import Hit, _Blob, _Repo, _Standin, record_commit


class GitFilesStandin(_Standin):
    """raw.githubusercontent.com: ``/{owner}/{repo}/{commit-or-branch}/{path}`` serving committed files."""

    def __init__(self) -> None:
        super().__init__()
        self._repos: dict[str, _Repo] = {}

    def add_commit(self, repo: str, files: Mapping[str, bytes], *, branch: str = "main") -> str:
        """A commit holding exactly these files ("owner/name" repo); the branch moves to it. Returns its sha."""
        blobs = {path.strip("/"): _Blob.of(bytes(data), False) for path, data in files.items()}
        with self._lock:
            return record_commit(self._repos, repo, blobs, branch)

    @property
    def api_url(self) -> str:
        """GitHub's REST API for the same repositories (``/api`` on this server)."""
        return self.url + "/api"

    async def _route(self, request: web.Request, hit: Hit) -> web.StreamResponse:
        segs = [unquote(s) for s in request.raw_path.split("?", 1)[0].lstrip("/").split("/")]
        not_found = web.Response(status=404, text="404: Not Found", content_type="text/plain")
        if segs[:2] == ["api", "repos"]:
            return self._api(segs[2:])
        if request.method not in ("GET", "HEAD") or len(segs) < 4:
            return not_found
        repo_id, rev, path = "/".join(segs[:2]), segs[2], "/".join(segs[3:])
        hit.file = path
        with self._lock:
            repo = self._repos.get(repo_id)
            commit = repo.resolve(rev) if repo else None
        blob = commit.files.get(path) if commit else None
        if blob is None:
            return not_found
        headers = {"Content-Type": "text/plain; charset=utf-8", "ETag": f'"{blob.sha256}"',
                   "Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"}
        return await self._send_file(request, hit, repo_id, path, blob.data, headers)


    def _api(self, segs: list[str]) -> web.Response:
        """``/repos/{o}/{r}/commits/{ref}`` (the commit a branch names) and ``/repos/{o}/{r}/git/trees/{sha}``
        (``?recursive=1``: every blob with its git blob id and size), as api.github.com answers them."""
        missing = web.json_response({"message": "Not Found", "status": "404"}, status=404)
        if len(segs) < 4:
            return missing
        with self._lock:
            repo = self._repos.get("/".join(segs[:2]))
            commit = repo.resolve(segs[-1]) if repo else None
        if commit is None:
            return missing
        if segs[2] == "commits":
            return web.json_response({"sha": commit.sha, "commit": {"message": "stand-in"}})
        if segs[2:4] == ["git", "trees"]:
            tree = [{"path": p, "mode": "100644", "type": "blob", "sha": b.oid, "size": len(b.data)}
                    for p, b in sorted(commit.files.items())]
            return web.json_response({"sha": commit.sha, "tree": tree, "truncated": False})
        return missing
