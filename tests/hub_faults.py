"""What a mirror, a proxy or a hostile Hub does that the real Hub does not: HubStandin's faults.

- ``HubStandin(no_hashes=True)``: the listing names each file and its size but no ``blobId`` and no
  ``lfs`` (a proxy that does not pass blob ids on), and files carry the proxy's own ETag
  (``"<crc32>-<size>"``, as nginx makes one), which is no hash of the content.
- ``hold_metadata()``: every metadata request (``/api/datasets/…``) is received, recorded, and never
  answered; ``metadata_held`` (a threading.Event) is set when the first one arrives.
- ``stall(repo, path, after=n)``: every GET of that file's content announces its full length, sends n
  bytes, then sends nothing more; ``stalled`` is set when the first one has sent its n bytes.
- ``show_commit(repo, shown)``: the listing and the files' ``X-Repo-Commit`` give ``shown`` as the
  commit id (upper case, short, padded, a path…), and ``shown`` resolves like the branch's commit.
- A file name holding ``..`` is listed as given (``add_commit`` keeps it).

A held request waits until ``release()`` (which ``stop()`` calls first): the test synchronises on
the events, never on the clock, and the client under test gives up on its own timeout.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web
from standin_base import Hit


class HubFaults:
    """The fault modes, mixed into HubStandin before the stand-in base (which gives ``_lock`` and ``_loop``)."""

    def __init__(self) -> None:
        super().__init__()
        self._shown: dict[str, str] = {}  # repo -> the commit id its listing shows instead of the real one
        self._stalls: dict[tuple[str, str], int] = {}
        self._holding_metadata = False
        self._gate: asyncio.Event | None = None  # held requests wait on it (made on the server's loop)
        self.metadata_held = threading.Event()
        self.stalled = threading.Event()

    def hold_metadata(self) -> None:
        """Metadata requests from now on are received and never answered (until ``release()``)."""
        with self._lock:
            self._holding_metadata = True

    def stall(self, repo: str, path: str, *, after: int) -> None:
        """Every GET of this file's content sends ``after`` bytes of its announced length, then stalls."""
        with self._lock:
            self._stalls[(repo, path)] = after

    def show_commit(self, repo: str, shown: str) -> None:
        """The listing (``sha``) and the files (``X-Repo-Commit``) name ``shown`` as the commit of every
        revision, and ``shown`` resolves to the branch's commit, as a mirror with ids of its own would."""
        with self._lock:
            self._shown[repo] = shown

    def release(self) -> None:
        """Let every held request go (its client has usually given up by then); nothing is held after."""
        with self._lock:
            self._holding_metadata = False
            self._stalls.clear()
            gate, self._gate = self._gate, None
        if gate is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(gate.set)

    def stop(self) -> None:
        self.release()
        super().stop()

    async def _hold(self, arrived: threading.Event) -> None:
        """Wait until release(): the answer that never comes."""
        with self._lock:
            if self._gate is None:
                self._gate = asyncio.Event()
            gate = self._gate
        arrived.set()
        await gate.wait()

    def _holds_metadata(self) -> bool:
        with self._lock:
            return self._holding_metadata

    async def _stalled_body(self, request: web.Request, hit: Hit, data: bytes, after: int,
                            headers: dict[str, str]) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Accept-Ranges": "bytes", **headers})
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[:after])
        hit.served, hit.status, hit.sent = True, 200, after
        await self._hold(self.stalled)
        return response

