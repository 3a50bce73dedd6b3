"""What the hostile routes did and what the redirect sink received, for tests to assert on.

Kept apart from the routes so the server state can own one log without importing aiohttp handlers.
The sink keeps every header it was sent, values included: a test proves that no credential
followed a redirect by finding none of its forms there.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class HostileLog:
    """Per selector (`content-number:3`): requests seen and replies spoiled; the sink's requests."""

    seen: dict[str, int] = field(default_factory=dict)
    spoiled: dict[str, int] = field(default_factory=dict)
    sink: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def next_is_bad(self, selector: str, every: int) -> bool:
        """Count a request on `selector`; True for every `every`-th one (each one when every is 1)."""
        with self._lock:
            n = self.seen[selector] = self.seen.get(selector, 0) + 1
            bad = n % every == 0
            if bad:
                self.spoiled[selector] = self.spoiled.get(selector, 0) + 1
            return bad

    def received(self, method: str, path: str, headers: list[tuple[str, str]], body_bytes: int) -> None:
        with self._lock:
            self.sink.append({"method": method, "path": path, "headers": headers, "body_bytes": body_bytes})

    def reset(self) -> None:
        with self._lock:
            self.seen, self.spoiled, self.sink = {}, {}, []

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"seen": dict(self.seen), "spoiled": dict(self.spoiled),
                    "sink": [dict(r, headers=list(r["headers"])) for r in self.sink]}
