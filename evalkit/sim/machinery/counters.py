"""What the simulated server saw, so tests can assert on retries, limits and exactly-once delivery."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any


def _slim(value: Any) -> Any:
    """Long strings (base64 images) replaced by their sha1: same identity, far cheaper JSON."""
    if isinstance(value, str) and len(value) > 256:
        return "sha1:" + hashlib.sha1(value.encode("utf-8", "replace")).hexdigest()
    if isinstance(value, dict):
        return {k: _slim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_slim(v) for v in value]
    return value


def server_request_key(body: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a request's model and messages (what per_key counts by)."""
    canon = json.dumps(
        {"messages": _slim(body.get("messages")), "model": body.get("model")},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


@dataclass
class SimCounters:
    """Counters of one server. Mutated on the server's loop; a lock makes snapshots safe from any thread.

    completions: successful non-empty answers; per_key: request key -> successful completions;
    unkeyed: questions the answer key does not hold (answered at chance: a run asked with other
    benchmark flags than the server was started with); cutoffs / per_key_cutoffs: replies cut off
    while thinking (evalkit.sim.thinking), which are not completions; abandoned: successful replies
    whose client had gone before they were sent (it timed out): counted as completions, never delivered.
    first_request_at: time.monotonic() when the first request arrived (None: none yet), for measuring how
    long a client takes to start asking.
    """

    requests: int = 0
    completions: int = 0
    rate_limited: int = 0
    errors_5xx: int = 0
    bad_requests: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    per_key: dict[str, int] = field(default_factory=dict)
    unkeyed: int = 0
    cutoffs: int = 0
    per_key_cutoffs: dict[str, int] = field(default_factory=dict)
    abandoned: int = 0
    first_request_at: float | None = None
    tiers_asked: dict[str, int] = field(default_factory=dict)  # requests per service tier named ("": none)
    tiers_served: dict[str, int] = field(default_factory=dict)  # requests let through, by the tier serving them
    capacity_refusals: int = 0  # requests refused because their tier had no capacity (machinery.tier_faults)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def start(self) -> None:
        with self._lock:
            if self.first_request_at is None:
                self.first_request_at = time.monotonic()
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def finish(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def completed(self, key: str) -> None:
        with self._lock:
            self.completions += 1
            self.per_key[key] = self.per_key.get(key, 0) + 1

    def cut_off(self, key: str) -> None:
        """Count a reply cut off while thinking (its output limit ran out before any answer)."""
        with self._lock:
            self.cutoffs += 1
            self.per_key_cutoffs[key] = self.per_key_cutoffs.get(key, 0) + 1

    def abandoned_reply(self) -> None:
        with self._lock:
            self.abandoned += 1

    def unkeyed_request(self) -> None:
        with self._lock:
            self.unkeyed += 1

    def status(self, code: int) -> None:
        """Count an error status sent back."""
        with self._lock:
            if code == 429:
                self.rate_limited += 1
            elif code >= 500:
                self.errors_5xx += 1
            elif code >= 400:
                self.bad_requests += 1

    def tier_asked(self, tier: str | None) -> int:
        """Count a request of a dialect that names service tiers, by the tier it named ("" for none); returns
        how many have named it so far (which flex requests are refused follows from it: tier_faults)."""
        with self._lock:
            self.tiers_asked[tier or ""] = n = self.tiers_asked.get(tier or "", 0) + 1
            return n

    def tier_served(self, tier: str | None) -> None:
        """Count a request let through, by the tier that serves it ("" for none named)."""
        with self._lock:
            self.tiers_served[tier or ""] = self.tiers_served.get(tier or "", 0) + 1

    def capacity_refusal(self) -> None:
        with self._lock:
            self.capacity_refusals += 1

    def fault(self, kind: str) -> None:
        with self._lock:
            self.faults[kind] = self.faults.get(kind, 0) + 1

    def reset(self) -> None:
        """Zero everything but in_flight (requests still running will finish and decrement it)."""
        with self._lock:
            self.requests = self.completions = self.rate_limited = self.errors_5xx = self.bad_requests = 0
            self.unkeyed = self.cutoffs = self.abandoned = 0
            self.first_request_at = None
            self.faults = {}
            self.per_key = {}
            self.per_key_cutoffs = {}
            self.tiers_asked = {}
            self.tiers_served = {}
            self.capacity_refusals = 0
            self.max_in_flight = self.in_flight

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.requests,
                "completions": self.completions,
                "rate_limited": self.rate_limited,
                "errors_5xx": self.errors_5xx,
                "bad_requests": self.bad_requests,
                "faults": dict(self.faults),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "per_key": dict(self.per_key),
                "unkeyed": self.unkeyed,
                "cutoffs": self.cutoffs,
                "per_key_cutoffs": dict(self.per_key_cutoffs),
                "abandoned": self.abandoned,
                "tiers_asked": dict(self.tiers_asked),
                "tiers_served": dict(self.tiers_served),
                "capacity_refusals": self.capacity_refusals,
            }

    def __getitem__(self, name: str) -> Any:
        """counters["completions"] reads a consistent value from any thread."""
        return self.snapshot()[name]
