"""The figures drawn by a child process that imports matplotlib while the run is still working.

matplotlib costs about 0.9 s of CPU to import and each figure 0.1-0.2 s more. In the run's own
process that time competes with the event loop for the GIL, or, after the last answer, simply adds
to the wait. A child process does it on another core: the CLI starts one with the command (a
long-lived Python process draws in-process instead, importing matplotlib once for all its runs).
It imports matplotlib at once, then waits on stdin for the figures' data (the analysed results, pickled:
parent and child are the same evalkit) and answers with the (title, path) pairs it drew. When
there is nothing to draw (the plots are unchanged) it is stopped; if it cannot start or fails,
`draw` returns None and the caller draws in its own process, so no figure is ever lost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalkit.metrics.analysis.result import ModelResult

DRAW_TIMEOUT_S = 300.0


class PlotProcess:
    """One child, used at most once; a context manager that never leaves it running.

    start=False defers the child until `start()`: `evalkit run` starts it once it knows there is
    something to ask (a fully cached re-run usually has no new plot to draw); `evalkit demo`, whose
    run is short, starts it with the command."""

    def __init__(self, *, start: bool = True) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._done = False
        if start:
            self.start()

    def start(self) -> None:
        if self._proc is not None or self._done:
            return
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "evalkit.report.plot_process"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            self._done = True

    def draw(self, plot_dir: Path, results: Sequence[ModelResult]) -> list[tuple[str, Path]] | None:
        """The figures of `results` drawn into plot_dir by the child, or None when it could not (or was
        never started: importing matplotlib here costs the same as in a child started now)."""
        proc, self._proc, self._done = self._proc, None, True
        if proc is None:
            return None
        slim = [dataclasses.replace(m, records=()) for m in results]  # the figures never read records
        try:
            out, _ = proc.communicate(pickle.dumps((Path(plot_dir), slim)), timeout=DRAW_TIMEOUT_S)
            return pickle.loads(out) if proc.returncode == 0 and out else None
        except (OSError, subprocess.TimeoutExpired, pickle.UnpicklingError, EOFError):
            _stop(proc)
            return None

    def close(self) -> None:
        """Stop an unused child (it has written nothing: it only writes after reading its job)."""
        proc, self._proc, self._done = self._proc, None, True
        if proc is not None:
            _stop(proc)

    def __enter__(self) -> PlotProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError, ValueError):
            pipe.close()  # type: ignore[union-attr]


def _serve() -> int:
    from evalkit.report import figures, plots

    plots.pyplot()  # the slow part, done before the data arrives
    job = sys.stdin.buffer.read()
    if not job:
        return 0  # nothing to draw
    plot_dir, results = pickle.loads(job)
    drawn = figures.draw_all(plot_dir, results, skip_unchanged=False)
    sys.stdout.buffer.write(pickle.dumps(drawn))
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
