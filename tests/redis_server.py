"""A real `redis-server` (Debian's package) for the tests that share a cache, rate limits or a budget.

Each server runs in a temporary folder on a free port with persistence off, and is stopped (or killed, to
imitate a crash) by the test. Without the binary those tests skip with the reason, except under CI=true,
where a missing server fails them: `.ci/run` installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

START_DEADLINE_S = 60.0  # a generous bound on the server becoming ready (an event that comes)


def redis_binary() -> str:
    """The redis-server to run; skips (or, under CI=true, fails) when it is not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed (apt-get install redis-server); CI must run these tests")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process; `url` reaches it (with `password`, when one is required)."""

    def __init__(self, folder: Path, password: str | None = None) -> None:
        self.folder = folder
        self.password = password
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.folder)]
        if self.password:
            args += ["--requirepass", self.password]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_DEADLINE_S
        while not self._answers():
            assert self.process.poll() is None, "redis-server exited at start"
            assert time.monotonic() < deadline, f"redis-server not ready after {START_DEADLINE_S} s"
            time.sleep(0.02)
        return self

    def _answers(self) -> bool:
        import redis

        try:
            with redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1) as client:
                return bool(client.ping())
        except (redis.RedisError, OSError):
            return False

    def kill(self) -> None:
        """Die as a crashed server does: at once, without a goodbye."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def client(self):  # noqa: ANN201 - a redis.Redis
        import redis

        return redis.Redis.from_url(self.url)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
