"""Run a coroutine to its end from synchronous code, also where an event loop is already running.

`asyncio.run` refuses to start inside a running loop, and a notebook cell runs inside one. There the
coroutine runs on a worker thread with its own loop (nothing of asyncio is patched, the caller's
loop is left alone), in a copy of the caller's context (so output lands in the calling cell), while
the calling thread waits.

Ctrl-C (or the notebook's interrupt) reaches the waiting thread, never the worker, and a worker
cannot have a signal handler. So the waiting thread tells the worker's run through an
`Interrupter` (engine/stopping/shutdown.py): the run stops as on Ctrl-C (no new request, the replies on their
way received and recorded, records flushed, resumable), the worker ends, is joined, and the caller
gets KeyboardInterrupt. A second interrupt stops the run at once; the thread is still joined, so
no thread is left running.
"""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from evalkit.engine.stopping.shutdown import INTERRUPTER, Interrupter

T = TypeVar("T")
INTERRUPTED = "evalkit: interrupted; every reply received is recorded: the same call again resumes the run"


def loop_running() -> bool:
    """True when this thread is inside a running event loop (a notebook cell, an async function)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(make())`, or, inside a running loop, the same on a worker thread."""
    if not loop_running():
        return asyncio.run(make())
    return run_coroutine_blocking(make)


def run_coroutine_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run `make()` on a new thread with its own event loop and wait for its result or exception.

    An exception raised in the waiting thread (KeyboardInterrupt from Ctrl-C) interrupts the run as
    Ctrl-C does, waits for the thread to end, and is raised again."""
    interrupter = Interrupter()
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    finished = threading.Event()

    def work() -> None:
        INTERRUPTER.set(interrupter)  # this thread's copy of the context; the run's tasks inherit it
        try:
            outcome["value"] = asyncio.run(_interruptible(make, interrupter))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = e
        finally:
            finished.set()

    thread = threading.Thread(target=context.run, args=(work,), name="evalkit-run")
    stopped: BaseException | None = None
    with _interruptible_wait():
        try:
            thread.start()
        except BaseException as e:  # noqa: BLE001 - e.g. Ctrl-C as it starts: it is told, then joined
            stopped = e
            interrupter.interrupt()
        # waited on an event, not on join(): Python 3.11's join, interrupted, can mark a live thread stopped
        while thread.ident is not None and not finished.is_set():
            try:
                finished.wait(0.5)  # a signal interrupts the wait at once on POSIX; the timeout serves elsewhere
            except BaseException as e:  # noqa: BLE001 - Ctrl-C while waiting: the run stops, then it is raised
                stopped = stopped or e
                interrupter.interrupt()
        if thread.ident is not None:
            thread.join()  # its last steps, after `finished`
    if isinstance(stopped, KeyboardInterrupt):  # the run has stopped as on Ctrl-C (it said so, unless quiet)
        raise KeyboardInterrupt(INTERRUPTED) from None
    if stopped is not None:
        raise stopped
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def _interruptible(make: Callable[[], Coroutine[Any, Any, T]], interrupter: Interrupter) -> T:
    """The worker's main task: told to stop before or after the run's own handler listens, it is cancelled;
    told at any time, it ends with KeyboardInterrupt, as Ctrl-C ends a run."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    interrupter.set_fallback(lambda: loop.call_soon_threadsafe(task.cancel))
    try:
        value = await make()
    except asyncio.CancelledError:
        if interrupter.count:
            raise KeyboardInterrupt from None
        raise
    finally:
        interrupter.set_fallback(None)
    if interrupter.count:  # told just as the run ended: its results are written; stop as Ctrl-C does
        raise KeyboardInterrupt
    return value


class _interruptible_wait:
    """While the main thread waits for the worker, Ctrl-C raises KeyboardInterrupt there.

    The handler in place may be a running loop's (asyncio.run cancels its main task on the first
    Ctrl-C), which cannot act while this thread blocks that loop; the default handler is put in its
    place until the wait ends. An ignored SIGINT stays ignored; other threads change nothing."""

    def __enter__(self) -> None:
        self.previous: Any = None
        if threading.current_thread() is not threading.main_thread():
            return
        current = signal.getsignal(signal.SIGINT)
        if current in (signal.SIG_IGN, signal.default_int_handler) or current is None:
            return
        self.previous = current
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
