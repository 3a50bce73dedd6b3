"""What the stand-ins for the Hub and for raw.githubusercontent.com share: a threaded aiohttp server on
127.0.0.1 recording every request before it answers (`Hit`), repositories of content-addressed commits,
and Range answers. See hub_standin.py for the protocol each one speaks."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from typing_extensions import Self


_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", re.IGNORECASE)


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob: what the Hub reports as ``oid`` / ``blobId`` and as a plain file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Hit:
    """One request as the stand-in saw it; status and sent are filled in before the answer leaves."""

    method: str
    path: str
    query: str
    range: str | None
    authorization: str | None
    status: int = 0
    file: str | None = None  # the repo path of the file served (or asked for), if any
    served: bool = False  # a GET that carried file content (200 or 206)
    sent: int = 0  # bytes of file content written (fewer than announced when interrupted)


@dataclass(frozen=True)
class _Blob:
    """A file's bytes and the identities the Hub derives from them."""

    data: bytes
    lfs: bool
    sha256: str
    oid: str  # git blob id: of the content, or of the LFS pointer file for LFS files
    pointer_size: int

    @classmethod
    def of(cls, data: bytes, lfs: bool) -> _Blob:
        sha256 = hashlib.sha256(data).hexdigest()
        if not lfs:
            return cls(data, False, sha256, git_blob_id(data), 0)
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode()
        return cls(data, True, sha256, git_blob_id(pointer), len(pointer))

    @property
    def etag(self) -> str:
        return f'"{self.sha256 if self.lfs else self.oid}"'


@dataclass(frozen=True)
class _Commit:
    sha: str
    files: Mapping[str, _Blob]
    when: datetime


@dataclass
class _Repo:
    commits: dict[str, _Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    created: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def resolve(self, rev: str) -> _Commit | None:
        """A branch name or a full commit sha, as the Hub resolves revisions."""
        sha = self.branches.get(rev, rev)
        return self.commits.get(sha)


def _commit_sha(repo: str, parent: str | None, files: Mapping[str, _Blob]) -> str:
    """Deterministic: the same history gives the same shas on every run."""
    h = hashlib.sha1(f"{repo}\n{parent}\n".encode())
    for path in sorted(files):
        h.update(f"{path} {files[path].oid}\n".encode())
    return h.hexdigest()


def record_commit(repos: dict[str, _Repo], repo: str, blobs: Mapping[str, _Blob], branch: str) -> str:
    """A full-snapshot commit of `blobs` on `branch` (call with the stand-in's lock held); its sha."""
    r = repos.setdefault(repo, _Repo())
    sha = _commit_sha(repo, r.branches.get(branch), blobs)
    r.commits[sha] = _Commit(sha, blobs, datetime.now(timezone.utc))
    r.branches[branch] = sha
    return sha


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) inclusive for a single ``bytes=`` range; None to send everything; ValueError if unsatisfiable."""
    if not header or "," in header:
        return None  # no range, or several (allowed to answer 200 with the whole body)
    m = _RANGE.fullmatch(header)
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    first_s, last_s = m.groups()
    if not first_s:  # suffix: the last n bytes
        n = int(last_s)
        if n == 0 or size == 0:
            raise ValueError(header)
        return max(size - n, 0), size - 1
    first = int(first_s)
    last = min(int(last_s), size - 1) if last_s else size - 1
    if first >= size or last < first:
        raise ValueError(header)
    return first, last


class _Standin:
    """A threaded aiohttp server that records every request before answering it."""

    def __init__(self) -> None:
        self.log: list[Hit] = []
        self.errors: list[Exception] = []  # the stand-in's own failures (answered 501)
        self._lock = threading.Lock()
        self._cuts: dict[tuple[str, str], int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ports: list[int] = []

    # lifecycle ---------------------------------------------------------------------------------

    def _sites(self) -> int:
        """How many listening ports (origins) the server needs."""
        return 1

    def start(self) -> Self:
        """Listen on fresh random ports; returns once the server accepts connections."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        self._ports = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                app = web.Application()
                app.router.add_route("*", "/{tail:.*}", self._dispatch)
                runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1)
                loop.run_until_complete(runner.setup())
                for _ in range(self._sites()):
                    site = web.TCPSite(runner, "127.0.0.1", 0)
                    loop.run_until_complete(site.start())
                    self._ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
                self._runner = runner
            except BaseException as e:  # handed to the starting thread
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name=type(self).__name__, daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close the ports and the thread; later connections are refused."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if not self._ports:
            raise RuntimeError("start() the stand-in first")
        return f"http://127.0.0.1:{self._ports[0]}"

    # observation -------------------------------------------------------------------------------

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        """(method, path, Range header) of every request so far, in arrival order."""
        with self._lock:
            return [(h.method, h.path, h.range) for h in self.log]

    def downloads(self, path: str | None = None) -> int:
        """GETs that sent file content (200 or 206, complete or interrupted), of one repo path if given."""
        with self._lock:
            return sum(1 for h in self.log if h.served and (path is None or h.file == path))

    def clear(self) -> None:
        """Forget the requests seen so far (the repos stay)."""
        with self._lock:
            self.log.clear()

    def interrupt_next(self, repo: str, path: str, *, after: int) -> None:
        """The next GET sending this file's content announces its full length but drops the connection
        after ``after`` bytes (as a network cut would), once."""
        with self._lock:
            self._cuts[(repo, path)] = after

    # serving -----------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        hit = Hit(request.method, request.path, request.query_string, request.headers.get("Range"),
                  request.headers.get("Authorization"))
        with self._lock:
            self.log.append(hit)
        try:
            response = await self._route(request, hit)
        except Exception as e:
            # A bug in the stand-in: kept in `errors` and answered 501, which huggingface_hub does not
            # retry (a 500 would stall list_repo_tree through 23 s of backoff).
            self.errors.append(e)
            response = web.Response(status=501, text=f"stand-in error: {e!r}")
        if not hit.status:
            hit.status = response.status
        return response

    async def _route(self, request: web.Request, hit: Hit) -> web.StreamResponse:
        raise NotImplementedError

    async def _send_file(self, request: web.Request, hit: Hit, repo: str, path: str, data: bytes,
                         headers: dict[str, str]) -> web.StreamResponse:
        """The file's bytes (or the requested range of them) with the given headers; HEAD sends headers only."""
        hit.file = path
        headers = {"Accept-Ranges": "bytes", **headers}
        try:
            span = _byte_range(request.headers.get("Range"), len(data))
        except ValueError:
            headers["Content-Range"] = f"bytes */{len(data)}"
            return web.Response(status=416, headers=headers, text="Requested Range Not Satisfiable")
        status, body = 200, data
        if span is not None:
            status, body = 206, data[span[0]:span[1] + 1]
            headers["Content-Range"] = f"bytes {span[0]}-{span[1]}/{len(data)}"
        if request.method == "HEAD":
            return web.Response(status=status, body=body, headers=headers)  # aiohttp sends no body for HEAD
        with self._lock:
            cut = self._cuts.pop((repo, path), None)
        hit.served, hit.status = True, status
        if cut is None or cut >= len(body):
            hit.sent = len(body)
            return web.Response(status=status, body=body, headers=headers)
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[:cut])
        hit.sent = cut
        assert request.transport is not None
        request.transport.close()  # flushes what was written, then the peer sees the connection end early
        return response


def _local_port(request: web.Request) -> int | None:
    """The port the request came in on (the Host header may say anything)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return sockname[1] if sockname else None


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _tree_id(files: Mapping[str, _Blob], directory: str) -> str:
    """A stable id for a directory (a stand-in for git's tree id)."""
    h = hashlib.sha1()
    for path in sorted(p for p in files if p.startswith(directory + "/")):
        h.update(f"{path} {files[path].oid}\n".encode())
    return h.hexdigest()


def _encode_cursor(index: int) -> str:
    """Opaque, like the Hub's cursors."""
    return base64.urlsafe_b64encode(json.dumps({"i": index}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["i"])
    except (ValueError, KeyError, TypeError):
        return 0
