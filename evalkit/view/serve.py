"""`evalkit view --serve`: the site over HTTP on 127.0.0.1, for those who prefer a server to file://.

Bound to the loopback address, and it answers only requests addressed to it by a loopback name: a
page elsewhere that rebinds its own host name to 127.0.0.1 (DNS rebinding) sends its own name in
`Host` and gets 403, so it cannot read the results. Folders are never listed (404): the site links
every file it shows.
"""

from __future__ import annotations

import functools
import re
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+)(?::[0-9]{1,5})?$")


def host_allowed(host: str | None) -> bool:
    """True for 127.0.0.1, localhost or [::1], with or without a port; False for anything else or none."""
    if not host:
        return False
    m = _HOST.match(host.strip())
    return m is not None and m.group(1).lower() in LOOPBACK_NAMES


class _SiteHandler(SimpleHTTPRequestHandler):
    def send_head(self) -> Any:
        """Every GET and HEAD passes here first: refuse a foreign Host before touching a file."""
        if not host_allowed(self.headers.get("Host")):
            self.send_error(HTTPStatus.FORBIDDEN, "Host not allowed",
                            "this server answers http://127.0.0.1, http://localhost and http://[::1] only")
            return None
        return super().send_head()

    def list_directory(self, path: Any) -> None:
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return  # one line per image request would bury the address printed at start


def make_server(folder: Path, port: int = 0) -> ThreadingHTTPServer:
    """A threaded server of `folder` bound to 127.0.0.1 only (port 0: any free port)."""
    handler = functools.partial(_SiteHandler, directory=str(folder))
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
