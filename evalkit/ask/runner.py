"""The asyncio runner: cache lookup, image preparation, limiter, retries, one place for all of it
(keys and lookups themselves: ask/lookup.py).

Workers pull queries from one feed, so memory does not grow with the dataset and
at most `concurrency` requests are in flight. The feed looks queries up in the cache a chunk
at a time (keys and one batched `get_many`, in one thread hop per chunk, read ahead), so a
cached query costs no thread hop of its own and hits reach the sink without a worker waiting.
Blocking work (reading and hashing image files, decoding and encoding, the sqlite cache)
runs in threads, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import replace
from typing import TypeVar

from evalkit.ask.breaker import Breaker
from evalkit.ask.capacity import CAPACITY, as_capacity
from evalkit.ask.claims import Claims, claim_or_wait
from evalkit.ask.confirm import Confirmation
from evalkit.ask.feed import Feed, Looked
from evalkit.ask.lookup import CacheLookup
from evalkit.ask.outcome import NotSent, RunnerStats, unclassified, writable
from evalkit.ask.rate_limiter import Limiter, estimate_tokens
from evalkit.ask.retry import RetryPolicy, with_retries
from evalkit.ask.store.cache import CacheLike
from evalkit.ask.store.writes import CacheWrites
from evalkit.core.errors import DataError, EvalkitError, ProviderError, RunError
from evalkit.core.text.surrogates import repaired
from evalkit.core.types import GenParams, Outcome, Query, Response, is_cut_off
from evalkit.images.pipeline import ImagePipeline, PreparedImage
from evalkit.providers.base import Provider

T = TypeVar("T")
HALT_DRAIN_S = 2.0  # after the breaker trips, how long requests in flight may take to come back


class Runner:
    def __init__(self, provider: Provider, *, limiter: Limiter, cache: CacheLike, pipeline: ImagePipeline,
                 policy: RetryPolicy | None = None, fingerprints: bool = True, drain_s: float = 30.0,
                 breaker: Breaker | None = None, gate: Callable[[], Awaitable[None]] | None = None,
                 confirm: Confirmation | None = None):
        self.provider = provider
        self.limiter = limiter
        self.cache = cache
        self.pipeline = pipeline
        self.policy = policy or RetryPolicy()
        self.fingerprints = fingerprints
        self.drain_s = drain_s  # after a fatal error, how long requests in flight may take to finish
        self.stats = RunnerStats()
        self.breaker = breaker if breaker is not None else Breaker()  # .tripped: why the run stopped sending
        self.gate = gate  # awaited before the first request run() must send (the preflight); may raise
        self.confirm = confirm  # a model the server does not list: one request confirms it first (ask.confirm)
        self.claims: Claims | None = None  # processes sharing the cache send each key once (ask.claims)
        self.in_hand: asyncio.Semaphore | None = None  # live runs: queries holding prepared images (hold_images)
        self._stored: set[str] = set()  # keys this runner stored: a later duplicate looks again
        self._writes: CacheWrites | None = None
        self._stop: Callable[[], bool] | None = None  # run()'s stop, checked again before a first attempt
        self.spend: Callable[[Callable[[], Awaitable[Response]], Query, Sequence[PreparedImage]],
                             Awaitable[Response]] | None = None  # sends each request (--max-cost reserves)
        self.lookup = CacheLookup(provider.spec, cache, pipeline, fingerprints=fingerprints)  # keys, cache lookups
        self.received: Callable[[str, dict], None] | None = None  # the run directory's journal (ask.store.received)
        self.service_tier: str | None = None  # --service-tier: sent beside each request, never in its key
        self.tier_fallback: str | None = None  # --tier-fallback standard: a tier without capacity, then this one

    # ---- one query ---------------------------------------------------------------------
    def key_of(self, query: Query) -> str:
        """The cache key of a query as it will be sent (after fitting provider limits)."""
        return self.lookup.key_of(query)

    def keys_of(self, query: Query) -> tuple[str, ...]:
        """Every key an answer to `query` may be stored under (today's, then earlier versions')."""
        return self.lookup.keys_of(query)

    def lookup_many(self, queries: Sequence[Query]) -> list[Looked]:
        """The feed's thread work for a chunk of queries (CacheLookup.lookup_many)."""
        return self.lookup.lookup_many(queries)

    async def in_cache_thread(self, fn: Callable[..., T], *args: object) -> T:
        """fn(*args) on the cache's own thread when it has one (see ResponseCache.executor)."""
        executor = getattr(self.cache, "executor", None) if self.cache.blocking else None
        if executor is None:
            return await asyncio.to_thread(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(fn, *args))

    def cached_outcome(self, query: Query, looked: tuple[str, dict, list[str]]) -> Outcome:
        key, hit, fps = looked
        self.stats.cache_hits += 1
        return Outcome(query, Response.from_cache(hit), key, True, fps, hit.get("image_sizes") or [])

    async def ask(self, query: Query, missed: str | None = None) -> Outcome:
        """Ask one query: from the cache, or sent (and stored). `missed`: its key, already looked up
        and not found."""
        outcome, store = await self._ask(query, missed)
        if store is not None:
            await self._writer().put(*store)
        return outcome

    def _writer(self) -> CacheWrites:
        if self._writes is None:
            self._writes = CacheWrites(self)
        return self._writes

    def hold_images(self, n: int) -> None:
        """At most `n` queries hold their prepared images at once (sent, about to be, or waiting to retry).
        run() has twice as many workers as request slots, and each prepared its images before waiting for
        a slot: 64 big photos in memory for 32 requests. With n a few above the concurrency, the images in
        memory are bounded by the concurrency, whatever the data. A query whose images are all in the
        pipeline's memo already takes no place (see _ask): it adds nothing to memory."""
        self.in_hand = asyncio.Semaphore(n)

    async def _ask(self, query: Query, missed: str | None) -> tuple[Outcome, tuple[str, dict] | None]:
        """ask() but for storing the answer in a blocking cache: that (key, value) is returned. A query whose
        images are all in the pipeline's memo adds no image to memory: it takes no `in_hand` place (with
        faults, queries waiting to retry held those places and kept requests from being sent)."""
        parts = query.image_parts()
        memo_hits = all(self.pipeline.ready(p) for p in parts)
        if self.in_hand is None or not parts or memo_hits:
            return await self._ask_now(query, missed, memo_hits)
        async with self.in_hand:
            return await self._ask_now(query, missed, memo_hits)

    async def _ask_now(self, query: Query, missed: str | None,
                       memo_hits: bool) -> tuple[Outcome, tuple[str, dict] | None]:
        store: tuple[str, dict] | None = None
        in_memory = self.lookup.limits is None and (memo_hits or all(self.pipeline.ready(p) for p in query.image_parts()))
        look_again = missed is None or missed in self._stored
        if (self.cache.blocking and look_again) or not in_memory:
            key, hit, fps, prepared = await asyncio.to_thread(self.lookup.lookup, query, missed, look_again)
        else:  # everything is in memory: a thread hop would cost more than the work
            key, hit, fps, prepared = self.lookup.lookup(query, missed, look_again)
        if hit is not None:
            return self.cached_outcome(query, (key, hit, fps)), None
        if self.claims is not None:  # another process may be asking the same: its answer, or our turn
            theirs = await claim_or_wait(self.claims, key, look=lambda k: self.in_cache_thread(self.cache.get, k),
                                         in_thread=self.in_cache_thread)
            if theirs is not None:
                return self.cached_outcome(query, (key, theirs, fps)), None
        sizes = [[i.width, i.height] for i in prepared]
        try:
            send = functools.partial(self._send, query, prepared)
            response = await (send() if self.spend is None else self.spend(send, query, prepared))
        except BaseException:
            if self.claims is not None:  # stopped or cancelled: let another run ask at once (else it expires)
                with contextlib.suppress(Exception):
                    self.claims.release(key)
            raise
        if response.ok:
            if response.text.strip() or is_cut_off(response.text, response.finish_reason):
                # empty answers are not cached (a later run tries again); a cut-off is final
                value = {**response.to_cache(), "image_sizes": sizes}
                if self.fingerprints:  # a later hit needs no decode for its record's fingerprints
                    value["image_fps"] = fps
                if self.received is not None:  # first of all: in the kernel's hands, a SIGKILL cannot lose it
                    self.received(key, value)
                self._stored.add(key)
                if self.claims is not None:
                    self.claims.done(key)
                if self.cache.blocking:
                    store = (key, value)
                else:
                    self.cache.set(key, value)
        else:
            self.stats.errors += 1
        if response.ok:
            self.stats.input_tokens += response.usage.input_tokens
            self.stats.output_tokens += response.usage.output_tokens
        if key not in self._stored:  # no answer will reach the cache: whoever waits for it asks itself
            await self._unclaim(key)
        return Outcome(query, response, key, False, fps, sizes), store

    async def _unclaim(self, key: str) -> None:
        if self.claims is not None:
            await asyncio.shield(self.in_cache_thread(self.claims.release, key))

    async def _send(self, query: Query, images: Sequence[PreparedImage]) -> Response:
        """_attempts(), but while the model waits to be confirmed (evalkit.ask.confirm) one request goes and
        the others wait for its answer; until the first answer, each ending is shown to the confirmation:
        ModelNotServed when the server says it does not serve the model, AllFailAlike when the first
        requests all failed with the same permanent error."""
        confirm = self.confirm
        if confirm is None or confirm.settled:  # the run's start is over: nothing more to watch
            return await self._attempts(query, images)
        confirming = await confirm.turn()
        failed: list[ProviderError] = []
        try:
            response = await self._attempts(query, images, failed.append)
        except BaseException:
            if confirming:
                confirm.abandon()  # not sent after all (stopped, cancelled): the next request confirms
            raise
        confirm.settle(failed[-1] if failed else None, confirming)
        return response

    def params_of(self, query: Query) -> GenParams:
        """The query's generation settings as sent: with the service tier asked for (a delivery setting: the
        query's key, made from query.params, does not hold it)."""
        if self.service_tier is None:
            return query.params
        return replace(query.params, service_tier=self.service_tier)

    async def _attempts(self, query: Query, images: Sequence[PreparedImage],
                        failed: Callable[[ProviderError], None] | None = None) -> Response:
        """Send with retries; empty content is retried, and if still empty it is the answer. A reply cut
        off while thinking (token limit, no answer) is final at once: the same request would end the same.
        `failed` sees the error that ended the attempts, if one did."""
        last_empty: Response | None = None

        first = True
        params = self.params_of(query)

        async def call() -> Response:
            nonlocal last_empty, first
            if first and (self.breaker.tripped or (self._stop is not None and self._stop())):
                raise NotSent
            first = False
            try:
                response = await self.provider.complete(query.messages, params, images)
            except ProviderError as e:
                as_capacity(e, params.service_tier)  # the tier had no room: not the account's limit (ask.capacity)
                self.stats.rate_limited += e.kind == "rate_limit"
                self.stats.capacity_refused += e.kind == CAPACITY
                raise
            except (asyncio.TimeoutError, NotSent):  # NotSent: a batch pool run with --no-wait
                raise
            except Exception as e:  # noqa: BLE001 - the adapter let something through: this query's error
                raise unclassified(self.provider.spec.provider, e) from e
            response = writable(response)
            if not response.text.strip() and not is_cut_off(response.text, response.finish_reason):
                last_empty = response
                raise ProviderError("empty", "empty content")
            return response

        def on_attempt(n: int) -> None:
            self.stats.attempts += 1
            self.stats.retries += n > 1

        async def attempts() -> Response:
            """with_retries; a tier still without capacity after --tier-wait is asked once more at standard
            (--tier-fallback standard), with attempts of its own, and recorded at the tier that served it."""
            nonlocal params
            retried = functools.partial(with_retries, call, self.policy, self.limiter, est_tokens=estimate_tokens(query),
                                        tokens_of=lambda r: r.usage.input_tokens + r.usage.output_tokens,
                                        on_attempt=on_attempt, breaker=self.breaker)
            try:
                return await retried()
            except ProviderError as e:
                if e.kind != CAPACITY or self.tier_fallback is None or params.service_tier == self.tier_fallback:
                    raise
            params = replace(params, service_tier=self.tier_fallback)
            self.stats.tier_fallbacks += 1
            response = await retried()
            if response.served_tier is None:  # the reply named none: it was served at the tier asked
                response.served_tier = self.tier_fallback
            return response

        self.stats.sent += 1
        try:
            return await attempts()
        except NotSent:
            self.stats.sent -= 1
            self.stats.attempts -= 1
            raise
        except ProviderError as e:
            if e.kind == "empty" and last_empty is not None:
                return last_empty  # the model's answer after all: the benchmark's rule scores it
            e.message = repaired(e.message)  # it can quote the reply
            if failed is not None:
                failed(e)
            return Response(error=e.kind, error_message=e.message)  # type: ignore[arg-type]

    # ---- many queries ------------------------------------------------------------------
    async def run(self, queries: Iterable[Query], sink: Callable[[Outcome], None], *, workers: int,
                  stop: Callable[[], bool] | None = None,
                  group_of: Callable[[Query], Hashable | None] | None = None) -> RunnerStats:
        """Ask every query; `sink` receives each outcome as soon as it is known (in completion order).

        `stop` is checked before each new query (e.g. a spending budget), and again before its first
        attempt: once it says so, no new query is sent, and those in flight finish and reach the sink. With `group_of`, the first
        query of a group is answered before the rest of its group is sent (prompt caching).
        """
        feed = Feed(self, queries)
        failure: list[BaseException] = []  # the first fatal error: no new query starts after it, none is sent
        confirm = self.confirm
        self._stop = lambda: bool(failure) or (stop is not None and stop()) or (
            confirm is not None and confirm.stopped is not None)  # the first requests all failed alike
        self.breaker.success()  # its quiet time counts from the start of the run
        primed: dict[Hashable, asyncio.Event] = {}

        async def ask(query: Query, missed: str | None) -> tuple[Outcome, tuple[str, dict] | None]:
            key = group_of(query) if group_of is not None else None
            if key is None:
                return await self._ask(query, missed)
            event = primed.get(key)
            if event is None:  # this query primes its group (the first one not answered from the cache)
                primed[key] = event = asyncio.Event()
                try:
                    return await self._ask(query, missed)
                finally:
                    event.set()
            if not event.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), self.policy.timeout_s)
            return await self._ask(query, missed)

        async def answer(query: Query, looked: Looked) -> tuple[Outcome, tuple[str, dict] | None]:
            if looked is not None and looked[1] is not None:  # a cache hit: nothing to wait for
                return self.cached_outcome(query, looked), None  # type: ignore[arg-type]
            if self.gate is not None:  # its error is the run's, not this query's: outside the try
                await self.gate()
            try:
                return await ask(query, looked[0] if looked is not None else None)
            except RunError:  # the run's error (ModelNotServed, SharedCacheLost): nothing is sent or recorded after it
                raise
            except DataError as e:  # the item's data is bad (an unreadable image): a data error, nothing sent
                return Outcome(query, Response(error="data", error_message=str(e)), "", False), None
            except EvalkitError as e:  # this query's input is bad: its own error
                self.stats.errors += 1
                return Outcome(query, Response(error="permanent", error_message=str(e)), "", False), None

        unstored: list[str] = []  # keys whose answers the cache could not store: their claims are released

        def stored(key: str, error: BaseException | None) -> None:
            if error is not None:  # the cache could not store an answer: stop, as for any fatal error
                failure.append(error)
                unstored.append(key)

        async def worker() -> None:
            while not failure and not self.breaker.tripped and not (stop is not None and stop()):
                try:
                    item = await feed.next()
                    if item is None:
                        return
                    try:
                        outcome, store = await answer(*item)
                    except NotSent:
                        continue
                    if store is not None:  # stored in the background, batched: the worker goes on at once
                        self._writer().put_then(*store, functools.partial(stored, store[0]))
                    sink(outcome)
                    if confirm is not None and confirm.stopped is not None:
                        failure.append(confirm.stopped)  # the first requests all failed alike: recorded, stop
                        return
                except Exception as e:  # a fatal error (the sink could not record, a bug): drain, then raise
                    failure.append(e)
                    return

        tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, workers))]
        loop = asyncio.get_running_loop()
        halted_at: float | None = None
        failed_at: float | None = None  # when a fatal error was first seen: the drain's deadline counts from it
        try:
            while tasks:
                self.breaker.check()
                if self.breaker.tripped and halted_at is None:
                    halted_at = loop.time()
                if failure and failed_at is None:
                    failed_at = loop.time()
                timeout = (max(0.0, failed_at + self.drain_s - loop.time()) if failed_at is not None
                           else HALT_DRAIN_S if halted_at is not None else 0.5)
                done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED, timeout=timeout)
                tasks = list(pending)
                if failed_at is not None and loop.time() - failed_at >= self.drain_s:
                    break  # the drain deadline passed: give up on what is still in flight
                if halted_at is not None and loop.time() - halted_at >= HALT_DRAIN_S:
                    break  # the breaker tripped: what is still in flight is abandoned (asked on resume)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await feed.aclose()
            if self._writes is not None:  # every answer received is stored before run() ends, even cancelled
                await asyncio.shield(self._writes.idle())
            for key in unstored:  # whoever waits for these answers asks itself (a full disk may refuse this too)
                with contextlib.suppress(Exception):
                    await self._unclaim(key)
        if failure:
            raise failure[0]
        return self.stats
