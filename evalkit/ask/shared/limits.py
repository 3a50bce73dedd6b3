"""Rate limits shared through Redis by every process that asks one provider with one key (`--cache-url`).

A provider's limit belongs to the key, not to the process: three shards that each learn 40 req/s send 120,
and two thirds of it is refused. With a shared cache, processes that ask the same (provider, endpoint,
model) with the same key share, in Redis:

- **the rate**: one token bucket (requests, and tokens when a token limit is known) refilled on Redis's own
  clock by an atomic script; what any process's adaptive limits learn is published to it — a rate the
  provider announced in its headers as is, a rate learned from refusals alone (AIMD) scaled by the number
  of processes sharing it, since each one measured only its own share;
- **the in-flight cap, until a rate is known**: all processes together send at most one `--concurrency`
  worth of requests, through a semaphore of expiring leases (a killed process frees its slots). This is
  for keyed endpoints, whose quota is the key's; a server asked without a key (your own vLLM) is your
  compute, and shards are there to load it: each process keeps its own `--concurrency`;
- **pauses**: a wait the provider asked for (a reset time, a storm of refusals) holds everyone.

The scope is an HMAC of the provider, endpoint and model keyed by the API key: it tells keys apart without
the key, or anything that could reveal it, ever reaching Redis. redis-py's asyncio client is imported
only with a cache URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

PREFIX = "evalkit:v1:limits:"
POLL_S = 0.01  # how often a request waiting for a shared in-flight slot looks again
RATES_EVERY_S = 0.5  # how often a process re-reads whether a rate is known (its view for the semaphore)
MEMBER_TTL_S = 10.0  # a process that stops renewing its membership is no longer counted after this

# KEYS: bucket hash, rates hash. ARGV: tokens wanted. Returns the wait in ms (0: taken).
# Refill on Redis's clock; `level` may go into debt (a request bigger than the burst), paid back by waiting.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('HMGET', KEYS[2], 'rpm', 'tpm', 'pause_until')
local pause_until = tonumber(r[3] or '0') or 0
if pause_until > now then return pause_until - now end
local wait = 0
local names = {'req', 'tok'}
local per_min = {tonumber(r[1] or ''), tonumber(r[2] or '')}
local want = {1, tonumber(ARGV[1])}
local state = {}
for i = 1, 2 do
  if per_min[i] and per_min[i] > 0 and want[i] > 0 then
    local rate = per_min[i] / 60000.0
    local cap = math.max(1.0, rate * 100.0)
    local b = redis.call('HMGET', KEYS[1], names[i] .. '_level', names[i] .. '_last')
    local level = tonumber(b[1] or '') or cap
    local last = tonumber(b[2] or '') or now
    level = math.min(cap, level + (now - last) * rate)
    local need = math.min(want[i], cap)
    if level + 1e-9 < need then wait = math.max(wait, math.ceil((need - level) / rate)) end
    state[i] = {level, rate}
  end
end
if wait > 0 then return wait end
for i = 1, 2 do
  if state[i] then
    redis.call('HSET', KEYS[1], names[i] .. '_level', state[i][1] - want[i], names[i] .. '_last', now)
  end
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return 0
"""

# KEYS: in-flight zset. ARGV: cap, member, lease ms. 1: a slot is ours; 0: all taken.
_ENTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], 3600000)
  return 1
end
return 0
"""

# KEYS: rates hash, members zset. ARGV: rpm, tpm ('' = unknown), pause ms, member, source.
_PUBLISH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'rpm', ARGV[1]) end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'tpm', ARGV[2]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'source', ARGV[5]) end
local pause = tonumber(ARGV[3])
if pause > 0 then
  local until_ms = now + pause
  local old = tonumber(redis.call('HGET', KEYS[1], 'pause_until') or '0') or 0
  if until_ms > old then redis.call('HSET', KEYS[1], 'pause_until', until_ms) end
end
redis.call('PEXPIRE', KEYS[1], 3600000)
return 1
"""


def scope_of(api_key: str | None, provider: str, endpoint: str, model: str) -> str:
    """Who shares a limit: an HMAC of provider, endpoint and model keyed by the API key (never the key)."""
    message = f"{provider}\0{endpoint}\0{model}".encode()
    return hmac.new((api_key or "").encode(), message, hashlib.sha256).hexdigest()[:32]


class SharedLimits:
    """One scope's shared bucket, in-flight cap and pauses (see the module docstring). A Redis that stops
    answering raises `lost(error)` (the shared cache's SharedCacheLost: the run stops, resumable), or, with
    `fallback`, leaves this process to its own limits from then on."""

    def __init__(self, client: Any, scope: str, concurrency: int | None, owner: str, lease_s: float, *,
                 lost: Callable[[BaseException], Exception], errors: tuple[type[BaseException], ...],
                 fallback: bool = False) -> None:
        self._client = client
        self._lost, self._errors, self._fallback = lost, errors, fallback
        self.broken = False  # fallback: Redis is gone, the process goes on with its own limits
        self.scope = scope
        self.concurrency = concurrency
        self.owner = owner
        self.lease_ms = int(lease_s * 1000)
        base = PREFIX + scope
        self._bucket, self._rates, self._inflight, self._members = (f"{base}:bucket", f"{base}:rates",
                                                                    f"{base}:inflight", f"{base}:members")
        self._take_script = client.register_script(_TAKE)
        self._enter_script = client.register_script(_ENTER)
        self._publish_script = client.register_script(_PUBLISH)
        self._known = False  # a rate is known (then no shared in-flight cap)
        self._checked = -1e9
        self._slot = 0
        self._joined = -1e9
        self._gate = asyncio.Lock()

    async def _guarded(self, work: Awaitable[T], otherwise: T) -> T:
        if self.broken:
            work.close()  # type: ignore[attr-defined]
            return otherwise
        try:
            return await work
        except self._errors as e:
            if not self._fallback:
                raise self._lost(e) from None
            self.broken = True
            return otherwise

    async def _rate_known(self) -> bool:
        now = time.monotonic()
        if not self._known and now - self._checked >= RATES_EVERY_S:
            self._checked = now
            self._known = any(v is not None for v in await self._client.hmget(self._rates, "rpm", "tpm"))
        return self._known

    async def _enter_slot(self) -> str | None:
        """Wait for a shared in-flight slot while no rate is known; the lease to give back (None: none taken).
        One request of this process at a time asks Redis (the others queue here), so a full semaphore costs
        each process one poll per POLL_S, not one per waiting request."""
        if self._known or self.concurrency is None:
            return None
        async with self._gate:
            while not await self._rate_known():
                self._slot += 1
                member = f"{self.owner}:{self._slot}"
                if await self._enter_script(keys=[self._inflight], args=[self.concurrency, member, self.lease_ms]):
                    return member
                await asyncio.sleep(POLL_S)
        return None

    async def _leave(self, member: str | None) -> None:
        if member is not None:
            await self._client.zrem(self._inflight, member)

    async def _wait_s(self, tokens: int) -> float:
        """Take a request (and `tokens`) from the shared bucket: 0.0, or the seconds to wait first."""
        now = time.monotonic()
        if now - self._joined >= MEMBER_TTL_S / 3:
            self._joined = now
            await self._join()
        return float(await self._take_script(keys=[self._bucket, self._rates], args=[max(0, int(tokens))])) / 1000.0

    async def _publish_rates(self, rpm: float | None, tpm: float | None, pause_s: float, source: str) -> None:
        """What this process learned: a rate learned from refusals alone (AIMD) measured this process's share
        of the traffic, so it is scaled by the number of processes sharing the scope."""
        if source == "aimd":
            sharing = await self.sharing()
            rpm, tpm = (None if rpm is None else rpm * sharing), (None if tpm is None else tpm * sharing)
        await self._publish_script(keys=[self._rates, self._members],
                            args=["" if rpm is None else f"{rpm:.3f}", "" if tpm is None else f"{tpm:.3f}",
                                  int(max(0.0, pause_s) * 1000), self.owner, source or ""])
        if rpm is not None or tpm is not None:
            self._known = True

    async def _join(self) -> None:
        """Count this process among those sharing the scope (renewed as it publishes and asks)."""
        await self._client.zadd(self._members, {self.owner: time.time() + MEMBER_TTL_S})
        await self._client.pexpire(self._members, 3_600_000)

    async def sharing(self) -> int:
        await self._client.zremrangebyscore(self._members, "-inf", time.time())
        await self._join()
        return max(1, int(await self._client.zcard(self._members)))

    async def close(self) -> None:
        if not self.broken:
            with contextlib.suppress(*self._errors):
                await self._client.zrem(self._members, self.owner)
        with contextlib.suppress(*self._errors):
            await self._client.aclose()

    # -- what the limiter calls: each guarded against a Redis that stops answering ------------------
    async def enter(self) -> str | None:
        return await self._guarded(self._enter_slot(), None)

    async def leave(self, member: str | None) -> None:
        await self._guarded(self._leave(member), None)

    async def wait_s(self, tokens: int) -> float:
        return await self._guarded(self._wait_s(tokens), 0.0)

    async def publish(self, rpm: float | None, tpm: float | None, pause_s: float, source: str) -> None:
        """Fire and forget (the limiter does not wait on it): a lost Redis shows at the next request instead."""
        with contextlib.suppress(Exception):
            await self._guarded(self._publish_rates(rpm, tpm, pause_s, source), None)

