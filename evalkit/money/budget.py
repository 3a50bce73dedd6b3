"""`--max-cost` as a ledger: what was spent, what requests in flight may still cost, and what is left.

Why reservations: a budget checked only against what answers have cost so far lets every request already
in flight pass it (32 in flight overshot a cap by ~40%). Each request instead reserves its estimated cost
(evalkit.money.costs.request_estimate: all of max_tokens as output, so an upper bound but for the input
estimate) before it is sent, and the answer's actual cost replaces the reservation. A request whose
reservation would pass the cap is not sent, so spending passes the cap by no more than the estimate error
of the requests in flight, never by a whole request's cost.

`spent` starts at what earlier invocations spent on the same run directory (records_cost of its records),
so a resumed run does not start over. This ledger is one process's; evalkit.money.shared_budget keeps the
same one in Redis for several processes.
"""

from __future__ import annotations

from dataclasses import dataclass

SLACK_USD = 1e-12  # float sums: a reservation that lands exactly on the cap fits


@dataclass(frozen=True)
class Hold:
    """One request's reservation: its amount, and its id in a shared ledger ("" in a local one)."""

    amount: float
    id: str = ""


class Budget:
    """A local ledger: pure, no I/O (the runner's pre-send hook, evalkit.money.spending, drives it)."""

    shared = False

    def __init__(self, cap: float, spent: float = 0.0) -> None:
        self.cap = cap
        self.spent = spent
        self.reserved = 0.0
        self._holds = 0

    def reserve(self, est: float) -> Hold | None:
        """A hold of `est` when spent + reserved + est stays within the cap, else None (nothing changes)."""
        est = max(0.0, est)
        if self.spent + self.reserved + est > self.cap + SLACK_USD:
            return None
        self.reserved += est
        self._holds += 1
        return Hold(est)

    def settle(self, hold: Hold, actual: float) -> None:
        """The answer arrived (or the request was not sent: actual 0): its cost replaces its reservation."""
        self._holds -= 1
        self.reserved = max(0.0, self.reserved - hold.amount) if self._holds else 0.0  # no float residue
        self.spent += max(0.0, actual)

    @property
    def left(self) -> float:
        """What new requests may still reserve."""
        return max(0.0, self.cap - self.spent - self.reserved)

    def halt(self) -> None:
        """A request did not fit: nothing to tell anyone else (a shared ledger tells the other processes)."""

    def close(self) -> None:
        """Nothing to close (a shared ledger closes its connection)."""
