"""Live progress for a run: done/total, rate, ETA, cache hits, errors, tokens (rich)."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from evalkit.core.types import Outcome


class RunProgress:
    """A rich progress bar when the console is a terminal; silent otherwise (logs, tests, CI)."""

    def __init__(self, total: int, label: str, console: Console | None = None, enabled: bool = True):
        self.console = console or Console(stderr=True)
        self.done = self.hits = self.errors = self.tokens = 0
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("cache {task.fields[hits]} · errors {task.fields[errors]} · tokens {task.fields[tokens]}"),
            console=self.console, disable=not (enabled and self.console.is_terminal), transient=False,
        )
        self._task = self._progress.add_task(label, total=total, hits=0, errors=0, tokens=0, rate="")

    def advance(self, outcome: Outcome) -> None:
        self.done += 1
        self.hits += outcome.cached
        self.errors += not outcome.response.ok
        if not outcome.cached:
            self.tokens += outcome.response.usage.input_tokens + outcome.response.usage.output_tokens
        if self._progress.disable:
            return
        task = self._progress.tasks[0]
        speed = task.speed or 0.0
        self._progress.update(self._task, advance=1, hits=self.hits, errors=self.errors,
                              tokens=f"{self.tokens:,}", rate=f"{speed:6.1f}/s")

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()
