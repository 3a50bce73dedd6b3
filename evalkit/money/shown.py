"""How a run's cost is shown: twice wherever it is shown, what this invocation paid and what the run's
answers cost at list price ("$0.00 paid · $0.1297 list"). One function, so the console, report.md,
compare, the matrix, the viewer and every export say it alike.

"paid" is summary.json's `this_run.cost_usd` (what the command that wrote the summary sent); a summary
written before 0.4 has none: a command that sent nothing paid 0, else its `usage.cost_usd` stands in
(what the run directory's answers cost when they were asked). "list" is `usage.list_cost_usd`: every
answer, cached or not, at the list price of the delivery that served it; where some answer came by batch
the standard (live) price's figure, `usage.list_cost_standard_usd`, is said beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# what the two words mean, said once under every table that shows them (report.md, compare's report.md)
COST_NOTE = ("Cost: *paid* is what the command that wrote the run's summary spent on requests; *list* is every "
             "answer of the run, from the cache or not, at the list price of the delivery that served it.")


@dataclass(frozen=True)
class RunCosts:
    """A run's two costs (USD; None: no price known) and the standard-price figure where it differs."""

    paid: float | None
    listed: float | None
    standard: float | None = None

    def text(self) -> str:
        return paid_and_list(self.paid, self.listed, self.standard)


def usd(value: float | None) -> str:
    """Dollars as a person reads them: cents from $1 on, four decimals below (an evaluation's cost is often
    a fraction of a cent), "—" for unknown."""
    if value is None:
        return "—"
    if value == 0:
        return "$0.00"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}" if value >= 0.00005 else "<$0.0001"


def paid_and_list(paid: float | None, listed: float | None, standard: float | None = None) -> str:
    """"$0.00 paid · $0.1297 list", with "($0.2594 at the standard price)" where a batch answered."""
    if paid is None and listed is None:
        return "unknown (no price)"
    text = f"{usd(paid)} paid · {usd(listed)} list"
    if standard is not None and standard != listed:
        text += f" ({usd(standard)} at the standard price)"
    return text


def run_costs(summary: Mapping[str, Any]) -> RunCosts:
    """The two costs a summary.json holds (module docstring: a summary before 0.4 has no paid figure of its
    own; its list cost is completed from its records by whoever reads them, evalkit/rundir/costs.py)."""
    usage = summary.get("usage") if isinstance(summary.get("usage"), Mapping) else {}
    this_run = summary.get("this_run") if isinstance(summary.get("this_run"), Mapping) else None
    if this_run is not None and "cost_usd" in this_run:
        paid = _number(this_run.get("cost_usd"))
    elif this_run is not None and this_run.get("sent") == 0:
        paid = 0.0
    else:
        paid = _number(usage.get("cost_usd"))
    return RunCosts(paid, _number(usage.get("list_cost_usd")), _number(usage.get("list_cost_standard_usd")))


def costs_line(summary: Mapping[str, Any]) -> str:
    """The summary's costs as every report says them."""
    return run_costs(summary).text()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
