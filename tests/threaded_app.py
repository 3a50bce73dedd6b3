"""A scripted aiohttp server for one test: its own event loop in a thread, on a free port of 127.0.0.1.

For a test that needs a server saying exactly one thing (a proxy's error body, a provider's long
refusal) where the simulator has no such mode; `with Server() as s:` serves until the block ends.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web


class ThreadedApp:
    """Subclasses give `make_app()`; `url` is the base URL (plus `path`) once the block is entered."""

    path = ""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def make_app(self) -> web.Application:
        raise NotImplementedError

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        runner = web.AppRunner(self.make_app(), access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}{self.path}"
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
