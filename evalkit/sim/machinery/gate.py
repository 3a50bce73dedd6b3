"""A gate in front of every reply, so a test can hold a run open until it has seen what it waits for.

A test that proves an order of events ("the second run is refused while the first is still asking")
must not race the clock: it holds the server's replies, checks, then releases them. The gate is open
by default; `hold(after=n)` lets n more replies through and then holds the rest; `release()` lets
every held and later reply go. Requests are counted on arrival either way, and a held request is
counted in `held` until it goes on, so a test can wait for "one request is waiting" as an event.
Lives on the server's event loop: call it from another thread through SimThread.
"""

from __future__ import annotations

import asyncio


class ReplyGate:
    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._allowance: int | None = None  # replies still let through while holding; None: no limit
        self.held = 0  # requests waiting at the gate now

    def hold(self, after: int = 0) -> None:
        """From now on, let `after` more replies through, then hold every later one."""
        if after < 0:
            raise ValueError(f"after must be 0 or more, not {after}")
        self._allowance = after
        if after == 0:
            self._open.clear()

    def release(self) -> None:
        """Let every held and later reply go."""
        self._allowance = None
        self._open.set()

    async def pass_through(self, closing: asyncio.Event) -> None:
        """Return when this reply may go: at once while open, else on release() or on server shutdown."""
        if self._allowance is not None and self._allowance > 0:
            self._allowance -= 1
            if self._allowance == 0:
                self._open.clear()
            return
        if self._open.is_set():
            return
        self.held += 1
        waiters = [asyncio.ensure_future(self._open.wait()), asyncio.ensure_future(closing.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.held -= 1
            for task in waiters:
                task.cancel()
