"""`evalkit view --serve`: the site over HTTP on 127.0.0.1, for those who prefer a server to file://."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return  # one line per image request would bury the address printed at start


def make_server(folder: Path, port: int = 0) -> ThreadingHTTPServer:
    """A threaded server of `folder` bound to 127.0.0.1 only (port 0: any free port)."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server


def serve(folder: Path, port: int, announce: Any) -> None:
    """Serve until Ctrl-C; `announce(url)` is called once the socket is listening."""
    server = make_server(folder, port)
    try:
        announce(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
