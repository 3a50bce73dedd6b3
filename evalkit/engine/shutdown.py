"""Ctrl-C and SIGTERM during a run: write what was received, then stop the way Ctrl-C does.

Records are buffered for up to 100 ms (see rundir.py). SIGTERM's default action would end the
process without unwinding, losing that buffer; under `asyncio.run` a first Ctrl-C cancels the
main task and unwinds, but nothing flushes before the unwinding starts. `on_signals` makes
both the same: the handler (run on the event loop, never in the middle of an append) calls the
flush functions, then cancels the task that entered the block — or, given a `drain` function,
lets it go on without new requests so that replies already on their way (paid for) are received
and recorded, and cancels it only after a deadline. The block turns the resulting
CancelledError into KeyboardInterrupt, which the CLI reports as "interrupted; re-run the same
command to resume" with exit status 130. A second signal flushes again and raises
KeyboardInterrupt at once (a stuck shutdown can still be interrupted).

    async with contextlib.AsyncExitStack() as stack:
        ...
        stack.enter_context(on_signals(rundir.flush))

Outside the main thread, or where the loop cannot handle signals, it installs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Interrupt:
    """What happened inside an `on_signals` block: the first signal received, if any."""

    signum: int | None = None
    count: int = 0
    errors: list[BaseException] = field(default_factory=list)  # raised by a flush function


def _flush_all(flushes: tuple[Callable[[], None], ...], state: Interrupt) -> None:
    for flush in flushes:
        try:
            flush()
        except Exception as e:  # noqa: BLE001 - every flush gets its chance; reported on stderr
            state.errors.append(e)
            print(f"evalkit: could not write buffered records: {e}", file=sys.stderr)


@contextlib.contextmanager
def on_signals(*flushes: Callable[[], None], signals: tuple[int, ...] = SIGNALS,
               drain: Callable[[], None] | None = None, drain_s: float = 10.0) -> Iterator[Interrupt]:
    """Within a coroutine: on SIGINT/SIGTERM call `flushes`, then cancel this task; the block
    then raises KeyboardInterrupt instead of CancelledError. Previous handlers come back after.

    With `drain`, the first signal calls it instead (it stops new requests) and the block goes on,
    so replies already on their way are received and recorded rather than paid for and thrown away;
    the task is cancelled only if the block is still running `drain_s` later, or at a second signal.
    When the block ends, the interruption is raised as KeyboardInterrupt all the same."""
    state = Interrupt()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    task = asyncio.current_task() if loop is not None else None
    installed: list[tuple[int, Any]] = []
    deadline: list[asyncio.TimerHandle] = []

    def handle(signum: int) -> None:
        state.count += 1
        _flush_all(flushes, state)
        if state.count > 1 or task is None:
            raise KeyboardInterrupt  # leaves run_forever: the second Ctrl-C is not polite
        state.signum = signum
        if drain is None or loop is None:
            task.cancel()
            return
        drain()
        deadline.append(loop.call_later(drain_s, task.cancel))

    if loop is not None and task is not None:
        for signum in signals:
            previous = signal.getsignal(signum)
            try:
                loop.add_signal_handler(signum, handle, signum)
            except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no support
                continue
            installed.append((signum, previous))
    try:
        yield state
    except asyncio.CancelledError:
        if state.signum is None:
            raise
        _flush_all(flushes, state)
        if sys.version_info >= (3, 11):
            task.uncancel()  # type: ignore[union-attr]
        raise KeyboardInterrupt from None
    finally:
        for handle_ in deadline:
            handle_.cancel()
        for signum, previous in installed:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)  # type: ignore[union-attr]
            with contextlib.suppress(Exception):
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    if state.signum is not None:  # the signal came after the block's last await: still an interruption
        _flush_all(flushes, state)
        raise KeyboardInterrupt
