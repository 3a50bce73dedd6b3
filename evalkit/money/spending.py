"""The runner's pre-send hook for `--max-cost`: reserve a request's estimated cost, send, settle.

A request whose reservation does not fit waits while this process has other requests in flight (their
answers usually cost less than reserved, and free room); when nothing of its own is in flight and it still
does not fit, the run stops sending (`exhausted`: the runner's `stop` says so, what is in flight finishes,
exit 1, resumable). So a run stops within one request's estimate of the cap, not one reservation per
request in flight below it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from evalkit.ask.outcome import NotSent
from evalkit.core.types import Query, Response
from evalkit.images.pipeline import PreparedImage
from evalkit.money.budget import Hold
from evalkit.money.costs import request_estimate
from evalkit.money.pricing import Price, cost_usd, price_of

T = TypeVar("T")


class Ledger(Protocol):
    """A budget's ledger: evalkit.money.budget.Budget (this process) or shared_budget.SharedBudget (Redis)."""

    shared: bool
    cap: float

    def reserve(self, est: float) -> Hold | None: ...

    def settle(self, hold: Hold, actual: float) -> None: ...

    def halt(self) -> None: ...


class Spending:
    """Runner.spend: every request sent goes through `send`, which holds its estimate against the ledger.

    `largest`: the largest cost of one request seen so far, the estimate for a model with no price whose
    provider reports each answer's cost (OpenRouter with a model no price is known for)."""

    def __init__(self, ledger: Ledger, price: Price | None, provider: str, *, largest: float = 0.0,
                 model: str = "", tier: str | None = None) -> None:
        self.ledger = ledger
        self.price = price
        self.reserve_price = price_of(price, None, tier)  # reservations at the requested tier's price
        self.provider = provider
        self.model = model  # its image-token formula's family
        self.largest = largest
        self.exhausted = False  # a request did not fit: no new request is sent
        self.sent_usd = 0.0  # what the answers of this invocation cost
        self._in_flight = 0
        self._settled: asyncio.Event | None = None

    def estimate(self, query: Query, images: Sequence[PreparedImage]) -> float:
        est = request_estimate(self.reserve_price, self.provider, query, [(i.width, i.height) for i in images],
                               self.model)
        return self.largest if est is None else est

    def cost(self, response: Response | None) -> float:
        """What an answer cost (reported, else priced); nothing for a failure or a request not sent."""
        if response is None or not response.ok:
            return 0.0
        return cost_usd(price_of(self.price, response.via, response.served_tier), response.usage) or 0.0

    async def send(self, send: Callable[[], Awaitable[Response]], query: Query,
                   images: Sequence[PreparedImage]) -> Response:
        """send() under a reservation; NotSent when the budget cannot hold this request."""
        hold = await self._reserve(self.estimate(query, images))
        response: Response | None = None
        try:
            response = await send()
            return response
        finally:
            cost = self.cost(response)
            self.sent_usd += cost
            self.largest = max(self.largest, cost)
            try:
                await asyncio.shield(self._call(self.ledger.settle, hold, cost))
            finally:
                self._in_flight -= 1  # after its hold is gone: until then, a request refused waits for it
            if self._settled is not None:  # those waiting for room look again
                self._settled.set()
                self._settled = None

    async def _reserve(self, est: float) -> Hold:
        while True:
            if self.exhausted:
                raise NotSent
            hold = await self._call(self.ledger.reserve, est)
            if hold is not None:
                self._in_flight += 1
                return hold
            if self._in_flight == 0 or getattr(self.ledger, "halted", False):
                self.exhausted = True
                await self._call(self.ledger.halt)
                raise NotSent
            if self._settled is None:
                self._settled = asyncio.Event()
            await self._settled.wait()

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        """A shared ledger's calls are round trips to Redis: in a thread, off the event loop."""
        return await asyncio.to_thread(fn, *args) if self.ledger.shared else fn(*args)
