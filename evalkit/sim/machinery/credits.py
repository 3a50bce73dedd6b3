"""A prepaid credit balance, as OpenRouter keeps one per account: requests spend it, and a request
made when nothing is left is refused (402) until it is topped up."""

from __future__ import annotations

import threading


class Credits:
    """USD credits (1 credit = 1 USD); `None` remaining means unlimited. Safe from any thread."""

    def __init__(self, remaining: float | None) -> None:
        self._lock = threading.Lock()
        self._remaining = remaining
        self._limit = remaining
        self._spent = 0.0

    @property
    def remaining(self) -> float | None:
        with self._lock:
            return self._remaining

    @property
    def limit(self) -> float | None:
        """What the key may spend in all: spent + remaining as of the last top-up (None: unlimited)."""
        with self._lock:
            return self._limit

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    def exhausted(self) -> bool:
        """Nothing left to spend (never, when unlimited)."""
        with self._lock:
            return self._remaining is not None and self._remaining <= 0

    def spend(self, usd: float) -> None:
        """Charge an answered request; the balance may go below zero (it is checked before, not during)."""
        with self._lock:
            self._spent += usd
            if self._remaining is not None:
                self._remaining -= usd

    def set(self, remaining: float | None) -> None:
        """A top-up: `remaining` is what is left from now on (None: unlimited)."""
        with self._lock:
            self._remaining = remaining
            self._limit = None if remaining is None else self._spent + remaining
