"""`--shared-budget NAME`: one `--max-cost` ledger in Redis for several processes (shards, teammates).

Keys under `evalkit:v1:budget:NAME:` — `spent` (a float, INCRBYFLOAT), `held` (reservation id -> amount),
`leases` (reservation id -> expiry, ms) and `stop`. A reservation is one Lua script, atomic on the server:
it drops lapsed reservations, then holds the estimate only if spent + reserved + est <= cap. Settling is
another: the reservation goes, the actual cost is added to `spent`.

Why leases: a killed process never settles; its reservations lapse after LEASE_S (an answer that arrives
later is still added when it settles), so a crash shrinks the shared budget for at most that long.
Why `stop`: the first process whose request does not fit marks the budget stopped at its cap, and every
other process is refused at its next reservation, so they stop together; once no reservation is left
anywhere the mark is dropped and the ledger alone decides again (a re-run with a larger --max-cost goes on).

The ledger is the budget of every process that names it, across invocations: the run directories' own
records do not add to it. A Redis that stops answering mid-run stops the run as the shared cache does
(exit 1, resumable; every answer received is recorded).
"""

from __future__ import annotations

import re
import uuid

from evalkit.ask.shared.cache import RedisStore
from evalkit.core.errors import EvalkitError, RunError
from evalkit.money.budget import Hold

PREFIX = "evalkit:v1:budget:"
LEASE_S = 900.0  # longer than a request with its retries takes; a killed process's holds lapse after it
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")

_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
local reserved = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do reserved = reserved + tonumber(v) end
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local est, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local stop = redis.call('GET', KEYS[4])
if stop then
  if reserved > 0 and tonumber(stop) >= cap then return {-1, tostring(spent)} end
  if reserved == 0 then redis.call('DEL', KEYS[4]) end
end
if spent + reserved + est > cap + 1e-12 then return {0, tostring(spent)} end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[3])
return {1, tostring(spent)}
"""

_SETTLE = """
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if tonumber(ARGV[2]) > 0 then return redis.call('INCRBYFLOAT', KEYS[1], ARGV[2]) end
return redis.call('GET', KEYS[1]) or '0'
"""


class SharedBudgetLost(RunError):
    """Redis stopped answering mid-run: the run stops, resumable (every answer received is recorded)."""

    exit_code = 1


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise EvalkitError(f"--shared-budget {name!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    return name


class SharedBudget:
    """A ledger in Redis (the interface of evalkit.money.budget.Budget); blocking: call it from a thread."""

    shared = True

    def __init__(self, url: str, name: str, cap: float, *, lease_s: float = LEASE_S) -> None:
        self.name = check_name(name)
        self.cap = cap
        self.lease_ms = int(lease_s * 1000)
        self.store = RedisStore(url, "--shared-budget")
        self.keys = [f"{PREFIX}{name}:{part}" for part in ("spent", "held", "leases", "stop")]
        self._owner = uuid.uuid4().hex[:12]
        self._n = 0
        self.halted = False  # another process stopped the budget
        self.spent = 0.0
        self._lost: SharedBudgetLost | None = None
        try:
            self._reserve = self.store.client.register_script(_RESERVE)
            self._settle = self.store.client.register_script(_SETTLE)
            self.spent = self.read_spent()
        except self.store.errors as e:
            raise EvalkitError(f"--shared-budget: cannot read the ledger at {self.store.shown} "
                               f"({type(e).__name__})") from None

    def read_spent(self) -> float:
        value = self.store.client.get(self.keys[0])
        return float(value) if value is not None else 0.0

    @property
    def left(self) -> float:
        return max(0.0, self.cap - self.spent)

    def _gone(self, error: BaseException) -> SharedBudgetLost:
        return SharedBudgetLost(f"the shared budget {self.name!r} at {self.store.shown} stopped answering "
                                f"({type(error).__name__}); every answer received is recorded: re-run the same "
                                "command to resume")

    def reserve(self, est: float) -> Hold | None:
        if self._lost is not None:
            raise self._lost
        self._n += 1
        hold = Hold(max(0.0, est), f"{self._owner}-{self._n}")
        try:
            ok, spent = self._reserve(keys=self.keys, args=[repr(hold.amount), repr(self.cap), hold.id,
                                                            self.lease_ms])
        except self.store.errors as e:
            raise self._gone(e) from None
        self.spent = float(spent)
        self.halted = int(ok) == -1
        return hold if int(ok) == 1 else None

    def settle(self, hold: Hold, actual: float) -> None:
        """Never raises: an answer that arrived is recorded whatever Redis does; the next reserve() says so."""
        try:
            self.spent = float(self._settle(keys=self.keys, args=[hold.id, repr(max(0.0, actual))]))
        except self.store.errors as e:
            self._lost = self._lost or self._gone(e)

    def halt(self) -> None:
        """This process's request did not fit: every other process stops at its next reservation."""
        try:
            self.store.client.set(self.keys[3], repr(self.cap))
        except self.store.errors as e:
            raise self._gone(e) from None

    def close(self) -> None:
        self.store.close()
