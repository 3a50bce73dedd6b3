"""`--max-cost` for one run: its ledger (this run directory's, or `--shared-budget`'s in Redis) and its lines.

What earlier invocations spent on the run directory (its records, cache hits costing nothing) counts, so a
resumed run does not start its budget over; with `--shared-budget` the Redis ledger already holds what
every process naming it spent, and the run directory's records do not add to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.settings import RunConfig
from evalkit.money.budget import Budget
from evalkit.money.costs import record_cost, records_cost
from evalkit.money.pricing import Price
from evalkit.money.spending import Ledger, Spending

if TYPE_CHECKING:
    from evalkit.ask.runner import Runner


def check_budget_flags(cfg: RunConfig, env: Mapping[str, str]) -> None:
    """--shared-budget needs a Redis (--cache-url) and a cap, and is not for --batch (its answers are
    settled per batch, not per request): one line, exit 2, before anything is opened."""
    if cfg.shared_budget is None:
        return
    if cfg.shared_cache_url(env) is None:
        raise EvalkitError("--shared-budget needs --cache-url redis://… (the ledger lives in that Redis)")
    if cfg.max_cost is None:
        raise EvalkitError("--shared-budget needs --max-cost USD (the cap the processes share)")
    if cfg.batch:
        raise EvalkitError("--shared-budget does not work with --batch (use --max-cost alone)")
    from evalkit.money.shared_budget import check_name

    check_name(cfg.shared_budget)


@dataclass
class RunBudget:
    """The cap, what was spent before this invocation, and the hook the runners send through."""

    cap: float
    earlier: float
    spending: Spending
    shared: str | None = None

    def total(self, this_invocation: float) -> float:
        """Spent in all: the shared ledger's (read now; as last seen if Redis is gone), else the run
        directory's earlier spend and this invocation's."""
        if not self.shared:
            return self.earlier + this_invocation
        ledger = self.spending.ledger
        with contextlib.suppress(Exception):
            return float(ledger.read_spent())  # type: ignore[attr-defined]
        return float(getattr(ledger, "spent", 0.0))

    def hook(self, runner: Runner, this_invocation: float) -> Runner:
        """The runner with every request it sends reserved against the budget. Called between runs, with
        nothing in flight: a local ledger first catches up with what batches of this invocation cost."""
        ledger = self.spending.ledger
        if isinstance(ledger, Budget):
            ledger.spent = max(ledger.spent, self.earlier + this_invocation)
        runner.spend = self.spending.send
        return runner

    def over(self, this_invocation: float) -> bool:
        """The run stops sending: a request did not fit, or (batches, settled by no hook) the cap is reached."""
        return self.spending.exhausted or (not self.shared and self.earlier + this_invocation >= self.cap)

    def left(self, this_invocation: float) -> float:
        """For batches: what may still be submitted."""
        return self.cap - self.earlier - this_invocation

    def where(self) -> str:
        return f"in shared budget {self.shared}" if self.shared else "in this run directory"

    def line(self, this_invocation: float, spent: float) -> str:
        return (f"spent ${spent:.4f} of ${self.cap:.4f} {self.where()} (this invocation "
                f"${this_invocation:.4f})")

    def to_summary(self, this_invocation: float, spent: float) -> dict[str, Any]:
        return {"max_cost_usd": self.cap, "spent_usd": spent, "this_invocation_usd": this_invocation,
                "earlier_usd": self.earlier, "shared_budget": self.shared}


def open_budget(stack: contextlib.ExitStack | contextlib.AsyncExitStack, cfg: RunConfig, env: Mapping[str, str],
                price: Price | None, provider: str, existing: Iterable[Record], model: str = "") -> RunBudget | None:
    """The run's budget (None without --max-cost); a shared ledger is closed with the stack."""
    if cfg.max_cost is None:
        return None
    existing = list(existing)
    largest = max((record_cost(price, r) or 0.0 for r in existing), default=0.0)
    ledger: Ledger
    if cfg.shared_budget is not None:
        from evalkit.money.shared_budget import SharedBudget  # lazy: redis-py only with a URL

        shared = SharedBudget(str(cfg.shared_cache_url(env)), cfg.shared_budget, cfg.max_cost)
        stack.callback(shared.close)
        ledger, earlier = shared, shared.spent
    else:
        earlier = records_cost(price, existing) or 0.0
        ledger = Budget(cfg.max_cost, earlier)
    # reserved at the tier asked; with --tier-fallback standard a flex request may be answered at standard: the
    # dearer of the two is reserved (ask.capacity), so a run whose flex capacity is gone stays within --max-cost
    reserve_tier = cfg.tier_fallback if cfg.tier_fallback is not None and cfg.service_tier == "flex" \
        else cfg.service_tier
    spending = Spending(ledger, price, provider, largest=largest, model=model, tier=reserve_tier)
    return RunBudget(cfg.max_cost, earlier, spending, cfg.shared_budget)


def start_line(budget: RunBudget) -> str | None:
    """Said at the start when something was spent already: how much, and what is left."""
    if budget.earlier <= 0:
        return None
    return (f"--max-cost ${budget.cap:.4f}: ${budget.earlier:.4f} already spent {budget.where()}, "
            f"${max(0.0, budget.cap - budget.earlier):.4f} left")


def stop_line(budget: RunBudget, this_invocation: float, missing: int) -> str:
    return (f"--max-cost reached: {budget.line(this_invocation, budget.total(this_invocation))}; {missing} "
            "queries not sent; re-run with a larger --max-cost to resume")
