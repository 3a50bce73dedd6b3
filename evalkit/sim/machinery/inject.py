"""What every route of the simulated server does alike before answering: latency, then the
injected faults (429, 5xx, 400, hang, drop, a malformed body), each shaped by the route's dialect."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from aiohttp import web

from evalkit.sim.machinery.wire import MALFORMED_BODY

if TYPE_CHECKING:
    from evalkit.sim.machinery.dialect import Dialect
    from evalkit.sim.machinery.state import SimState


async def _drop(request: web.Request) -> web.StreamResponse:
    """Close the connection without a byte of response (the client sees a disconnect)."""
    if request.transport is not None:
        request.transport.abort()
    raise asyncio.CancelledError  # aiohttp treats this as a dropped connection and writes nothing


async def apply_fault(request: web.Request, state: SimState, dialect: Dialect,
                      fault: str | None) -> web.StreamResponse | None:
    """Latency and the reply gate, then the faults every route shapes alike (429, 5xx, 400, hang, drop).

    Returns the response to send, or None when the route goes on (no fault, or a fault the
    route shapes itself: malformed, refusal, empty)."""
    counters, faults = state.counters, state.config.faults
    if state.latency_s > 0 and fault not in ("hang", "drop"):
        await asyncio.sleep(state.latency_s)
    await state.gate.pass_through(state.closing)
    if fault is None:
        return None
    counters.fault(fault)
    if fault == "429":
        counters.status(429)
        return dialect.error(429, "rate_limit", "rate limit exceeded (injected)", faults.headers_429())
    if fault in ("500", "503", "400"):
        status = dialect.overloaded_status if fault == "503" else int(fault)
        counters.status(status)
        kind = {"500": "server", "503": "overloaded", "400": "bad_request"}[fault]
        return dialect.error(status, kind, f"{kind.replace('_', ' ')} (injected)")
    if fault == "hang":
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(state.closing.wait(), timeout=faults.hang_s)
        counters.status(504)
        return dialect.error(504, "server", "gateway timeout (injected hang)")
    if fault == "drop":
        return await _drop(request)
    return None


async def roll_fault(request: web.Request, state: SimState,
                     dialect: Dialect) -> tuple[str | None, web.StreamResponse | None]:
    """This request's fault from the seeded dice, and the response when every route serves it alike
    (apply_fault's, or a malformed 200 body); None: the route goes on, shaping `refusal` and `empty`
    (or no fault) itself."""
    fault = state.dice.draw()
    served = await apply_fault(request, state, dialect, fault)
    if served is None and fault == "malformed":
        served = web.Response(status=200, text=MALFORMED_BODY, content_type="application/json")
    return fault, served
