"""What decides when a sampled run stops asking: one interface for `--until-ci` and `--until-decided`.

The engine asks a run's queries in the rule's order and, before each new query, asks the rule
whether the run is done; the rule sees every graded record (those resumed from the run directory
first, then each as it arrives, in completion order: a rule that needs the seeded order, as the
confidence sequences do, reads its answers back in that order itself). What it says of the sample
is summary.json's "sample" block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from evalkit.core.record import Record
from evalkit.core.types import Query


class StopRule(Protocol):
    def order(self, queries: Sequence[Query]) -> list[Query]:
        """The queries in the order they are to be sent."""
        ...

    def observe(self, record: Record) -> None:
        """One graded record of this run."""
        ...

    def done(self) -> bool:
        """True once no new query should be sent (those on their way still arrive and are recorded)."""
        ...

    def block(self) -> dict[str, Any] | None:
        """summary.json's "sample" block; None when every item was asked (the run is the whole set)."""
        ...
