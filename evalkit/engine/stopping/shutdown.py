"""Ctrl-C and SIGTERM during a run: write what was received, then stop the way Ctrl-C does.

Records are buffered for up to 100 ms (see rundir/layout.py). SIGTERM's default action would end the
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

Outside the main thread, or where the loop cannot handle signals, it installs nothing; a run on a
worker thread (engine/stopping/in_thread.py: `evalkit.run` inside a notebook's running loop) is told instead
by an `Interrupter` in its context, which the waiting thread calls when Ctrl-C reaches it: the same
handler then runs on the worker's loop. Several blocks open at once in one event loop (the runs of a
matrix) share one handler: each signal reaches every block.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupter:
    """Ctrl-C for a run on another thread's event loop, told from any thread.

    Signal handlers exist only in the main thread; a run on a worker cannot have one. Each
    `on_signals` block running in a context that holds this interrupter listens to it, and the first
    `interrupt()` runs the block's signal handler on its loop (no new request; the replies on their
    way are received). The `fallback` (the worker cancelling its main task, which the block turns
    into KeyboardInterrupt after flushing) serves while no block listens (before a run's block is
    entered, after it is left) and at every later interrupt: stop at once, unwinding, never by an
    exception thrown out of the worker's loop. `count` says how often it was told."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[int, Callable[[], None]] = {}
        self._fallback: Callable[[], None] | None = None
        self.count = 0
        self.told = threading.Event()  # set once interrupt() has passed the word on (tests wait on it)

    def interrupt(self) -> None:
        with self._lock:
            self.count += 1
            listeners = list(self._listeners.values()) if self.count == 1 else []
            targets = listeners or ([self._fallback] if self._fallback else [])
            for target in targets:  # each only queues a call on its loop: quick, and ordered with listen()
                with contextlib.suppress(RuntimeError):  # that loop has just closed
                    target()
        self.told.set()

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` on the first interrupt, unless the returned function was called before."""
        with self._lock:
            key = id(callback)
            self._listeners[key] = callback
        return lambda: self._forget(key)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._listeners.pop(key, None)

    def set_fallback(self, fallback: Callable[[], None] | None) -> None:
        """What an interrupt does while no block listens; called at once if one came already."""
        with self._lock:
            self._fallback = fallback
            if fallback is not None and self.count and not self._listeners:
                with contextlib.suppress(RuntimeError):
                    fallback()


#: The interrupter of the run in this context (set by engine/stopping/in_thread.py on its worker thread).
INTERRUPTER: contextvars.ContextVar[Interrupter | None] = contextvars.ContextVar("evalkit_interrupter",
                                                                                  default=None)


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


@dataclass
class _Block:
    """One `on_signals` block: its task, what it flushes, how it stops."""

    task: asyncio.Task[Any]
    flushes: tuple[Callable[[], None], ...]
    signals: tuple[int, ...]
    drain: Callable[[], None] | None
    drain_s: float
    state: Interrupt = field(default_factory=Interrupt)
    deadline: list[asyncio.TimerHandle] = field(default_factory=list)

    def stop(self, loop: asyncio.AbstractEventLoop, signum: int) -> None:
        """The first signal: drain (new requests stop, replies on their way are kept), else cancel."""
        self.state.signum = signum
        if self.drain is None:
            self.task.cancel()
            return
        self.drain()
        self.deadline.append(loop.call_later(self.drain_s, self.task.cancel))


# The blocks open on each loop: runs in one event loop at once (a model x benchmark matrix) each have
# theirs, and one signal handler per loop serves them all. A loop keeps one handler per signal, so a
# handler installed per block would leave every block but the last deaf to Ctrl-C.
_OPEN: dict[asyncio.AbstractEventLoop, list[_Block]] = {}
_PREVIOUS: dict[asyncio.AbstractEventLoop, list[tuple[int, Any]]] = {}
_UNLISTEN: dict[asyncio.AbstractEventLoop, Callable[[], None]] = {}  # the loop's Interrupter listener


def _dispatch(loop: asyncio.AbstractEventLoop, signum: int) -> None:
    blocks = [b for b in _OPEN.get(loop, ()) if signum in b.signals]
    again = any(b.state.count for b in blocks)
    for b in blocks:
        b.state.count += 1
        _flush_all(b.flushes, b.state)
    if again:
        raise KeyboardInterrupt  # leaves run_forever: the second Ctrl-C is not polite
    for b in blocks:
        b.stop(loop, signum)


def _join(loop: asyncio.AbstractEventLoop, block: _Block) -> None:
    blocks = _OPEN.setdefault(loop, [])
    installed = _PREVIOUS.setdefault(loop, [])
    for signum in block.signals:
        if any(s == signum for s, _ in installed):
            continue
        previous = signal.getsignal(signum)
        try:
            loop.add_signal_handler(signum, _dispatch, loop, signum)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no support
            continue
        installed.append((signum, previous))
    interrupter = INTERRUPTER.get()
    if interrupter is not None and loop not in _UNLISTEN:  # a worker thread's run: told, not signalled
        _UNLISTEN[loop] = interrupter.listen(
            lambda: loop.call_soon_threadsafe(_dispatch, loop, signal.SIGINT))
    stopping = next((b.state.signum for b in blocks if b.state.signum is not None), None)
    blocks.append(block)
    if stopping is not None:  # a run that starts while the others drain stops with them
        block.state.count = 1
        block.stop(loop, stopping)


def _leave(loop: asyncio.AbstractEventLoop, block: _Block) -> None:
    blocks = _OPEN.get(loop, [])
    if block in blocks:
        blocks.remove(block)
    if blocks:
        return
    _OPEN.pop(loop, None)
    unlisten = _UNLISTEN.pop(loop, None)
    if unlisten is not None:
        unlisten()
    for signum, previous in _PREVIOUS.pop(loop, []):
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signum)
        with contextlib.suppress(Exception):
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def on_signals(*flushes: Callable[[], None], signals: tuple[int, ...] = SIGNALS,
               drain: Callable[[], None] | None = None, drain_s: float = 10.0) -> Iterator[Interrupt]:
    """Within a coroutine: on SIGINT/SIGTERM call `flushes`, then cancel this task; the block
    then raises KeyboardInterrupt instead of CancelledError. Previous handlers come back after.

    With `drain`, the first signal calls it instead (it stops new requests) and the block goes on,
    so replies already on their way are received and recorded rather than paid for and thrown away;
    the task is cancelled only if the block is still running `drain_s` later, or at a second signal.
    When the block ends, the interruption is raised as KeyboardInterrupt all the same. Blocks open at
    once in one loop (several runs) all receive each signal."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    task = asyncio.current_task() if loop is not None else None
    if loop is None or task is None:
        yield Interrupt()
        return
    block = _Block(task, flushes, tuple(signals), drain, drain_s)
    state = block.state
    _join(loop, block)
    try:
        yield state
    except asyncio.CancelledError:
        if state.signum is None:
            raise
        _flush_all(flushes, state)
        if sys.version_info >= (3, 11):
            task.uncancel()
        raise KeyboardInterrupt from None
    finally:
        for handle_ in block.deadline:
            handle_.cancel()
        _leave(loop, block)
    if state.signum is not None:  # the signal came after the block's last await: still an interruption
        _flush_all(flushes, state)
        raise KeyboardInterrupt
