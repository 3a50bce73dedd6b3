"""Waiting on events, not on the clock: what a test that proves an order of events synchronises on.

The simulator's reply gate (evalkit.sim.machinery.gate) holds a run open; these wait until it has requests
held, until the server has nothing in flight, or until a child process has said something on
stderr. Each deadline is a generous upper bound on an event that comes (120 s: a loaded machine
takes seconds), never a pause that a test relies on.
"""

from __future__ import annotations

import os
import select
import subprocess
import time

from evalkit.sim.server import SimThread

DEADLINE_S = 120.0


def wait_until_held(sim: SimThread, proc: subprocess.Popen | None, n: int, timeout: float = DEADLINE_S) -> None:
    """Return once `n` requests wait at the simulator's gate: the run is then mid-way, and stays so
    until the test releases the gate. Fails at once if `proc` (the run) has ended."""
    deadline = time.monotonic() + timeout
    while sim.held < n:
        if proc is not None:
            assert proc.poll() is None, f"the run ended with {sim.held} of {n} requests held: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{sim.held} requests held after {timeout} s, waiting for {n}"
        time.sleep(0.02)


def wait_until_idle(sim: SimThread, timeout: float = DEADLINE_S) -> None:
    """Return once the server has no request in flight: everything it was asked is answered (or
    refused), so its counters are final."""
    deadline = time.monotonic() + timeout
    while sim.counters.snapshot()["in_flight"]:
        assert time.monotonic() < deadline, f"requests still in flight after {timeout} s"
        time.sleep(0.02)


def wait_for_lines(path, n: int, proc: subprocess.Popen, timeout: float = DEADLINE_S) -> None:  # noqa: ANN001
    """Return once the file at `path` holds `n` lines; fails if `proc` ends first."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_bytes().count(b"\n") >= n):
        assert proc.poll() is None, f"{path}: fewer than {n} lines when the run ended (exit {proc.returncode})"
        assert time.monotonic() < deadline, f"{path}: fewer than {n} lines after {timeout} s"
        time.sleep(0.02)


class StderrWatch:
    """A child's stderr, read as it comes so a test can wait for a line (its own pipe: `stderr=PIPE`).

    Reads the pipe's descriptor directly, so `finish()` (Popen.communicate) gets the rest intact."""

    def __init__(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None, "start the child with stderr=subprocess.PIPE"
        self.proc = proc
        self._fd = proc.stderr.fileno()
        self._seen = b""
        self._eof = False

    @property
    def text(self) -> str:
        return self._seen.decode("utf-8", "replace")

    def until(self, needle: str, timeout: float = DEADLINE_S) -> bool:
        """Read until `needle` has been written (True), or the child closed its stderr (False)."""
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            if self._eof:
                return False
            left = deadline - time.monotonic()
            assert left > 0, f"{needle!r} not written after {timeout} s; stderr so far: {self.text[-2000:]}"
            ready, _, _ = select.select([self._fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self._fd, 65536)
                self._eof = not chunk
                self._seen += chunk
        return True

    def finish(self, timeout: float = DEADLINE_S) -> tuple[str, str]:
        """Wait for the child to exit: (its stdout, its whole stderr)."""
        out, err = self.proc.communicate(timeout=timeout)
        if isinstance(err, bytes):
            err = err.decode("utf-8", "replace")
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
        return out or "", self.text + (err or "")
