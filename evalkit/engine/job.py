"""One run once resolved (its settings, endpoints, data, price, run directory) and how it talks.

What the steps of engine/evaluate.py hand each other: the `Job` they all read, and the `Talk` that
prints a line as the run goes and keeps the ones said again after the results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from evalkit.benchmarks.prepare import Prepared
from evalkit.benchmarks.run_settings import RunSettings
from evalkit.engine.location import Located
from evalkit.lint import LintSummary
from evalkit.money.pricing import Price
from evalkit.providers import ProviderSpec


@dataclass(frozen=True)
class Job:
    """One run, resolved: what the run's steps need once the run directory is locked."""

    s: RunSettings
    spec: ProviderSpec
    judge_spec: ProviderSpec | None
    prepared: Prepared
    price: Price | None
    where: Located
    config: dict[str, Any]
    env: Mapping[str, str]
    console: Console
    lint: LintSummary
    cutoff_budget: int | None = None  # --reask-cutoffs: the budget cut-off answers are asked again with
    command: str | None = None  # engine/reuse.py command_key: this command, as resolved before its data was read


@dataclass
class Talk:
    """The run's lines: `tell` prints one now; `say` prints it and keeps it for RunResult.messages (the
    CLI prints those again after the results)."""

    console: Console
    messages: list[str] = field(default_factory=list)
    lines: list[tuple[bool, str]] = field(default_factory=list)  # every line, in order; True: also a message

    def tell(self, message: str | None, *, kept: bool = False) -> None:
        if message:
            self.lines.append((kept, message))
            self.console.print(f"evalkit: {message}", markup=False, highlight=False, soft_wrap=True)

    def say(self, message: str | None) -> None:
        if message:
            self.messages.append(message)
            self.tell(message, kept=True)

    def replay(self, lines: list[tuple[bool, str]]) -> None:
        """Say again what another Talk said (a reused run's opening lines)."""
        for kept, line in lines:
            (self.say if kept else self.tell)(line)
