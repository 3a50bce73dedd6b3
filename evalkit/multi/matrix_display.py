"""One live display for a model x benchmark matrix: a line per pair, redrawn in place.

Each pair is an ordinary run whose progress (report/progress.py RunProgress) counts without drawing;
this shows them together on a terminal: count, rate, elapsed and ETA, errors and retries, the cost
so far where prices are known, and how the pair ended. Where stderr is not a terminal (a log, CI, a
notebook) the pairs print their own labelled lines instead, so nothing here draws. What a pair says
as it runs is prefixed with its name (TaggedConsole), so a line of a matrix says whose it is.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from evalkit.report.progress import RunProgress, fit_fields

PREFIX = "evalkit: "


class TaggedConsole(Console):
    """A console whose `evalkit: ...` lines name the pair they come from: `evalkit: mcq · vllm/x: ...`."""

    def __init__(self, tag: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tag = tag
        self._own = PREFIX + tag.split(" · ", 1)[0] + " · "  # a line that names its run already (progress)

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        first = objects[0] if objects else None
        if isinstance(first, str) and first.startswith(PREFIX) and not first.startswith(self._own):
            objects = (f"{PREFIX}{self.tag}: {first[len(PREFIX):]}", *objects[1:])
        super().print(*objects, **kwargs)


def pair_console(tag: str, given: Console | None, quiet: bool = False) -> Console:
    """The console a pair prints on: stderr (looked up as it prints, so a live display above can
    take the lines in), or the file of the console the caller gave."""
    if given is None:
        return TaggedConsole(tag, stderr=True, quiet=quiet)
    return TaggedConsole(tag, file=given.file, width=given.width, force_terminal=given.is_terminal,
                         force_jupyter=given.is_jupyter, quiet=quiet or given.quiet)


class MatrixDisplay:
    """The pairs' lines; `watch(i)` is pair i's watch_progress hook, `end(i, state)` says how it ended."""

    def __init__(self, labels: list[str], console: Console, enabled: bool = True) -> None:
        self.labels = labels
        self.console = console
        self.live_mode = enabled and console.is_terminal and not console.is_jupyter
        self._progress: list[RunProgress | None] = [None] * len(labels)
        self._state: list[str] = ["starting"] * len(labels)
        self._live: Any = None

    def watch(self, i: int) -> Callable[[RunProgress], RunProgress]:
        def shown(progress: RunProgress) -> RunProgress:
            self._progress[i] = progress
            self._state[i] = "asking" if not progress.label.startswith("judge") else "judging"
            return progress

        return shown

    def end(self, i: int, state: str) -> None:
        self._state[i] = state

    def row(self, i: int, width: int) -> str:
        name = self.labels[i].ljust(max(map(len, self.labels)))
        progress = self._progress[i]
        state = self._state[i]
        if progress is None:
            return f"{name} · {state}"
        room = max(20, width - len(name) - len(state) - 6)
        line = fit_fields(progress.fields()[1:], room)
        return f"{name} · {line}" + ("" if state in ("asking", "judging") else f" · {state}")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for i in range(len(self.labels)):
            yield Text(self.row(i, options.max_width), no_wrap=True, overflow="ellipsis")

    def __enter__(self) -> MatrixDisplay:
        if self.live_mode:
            from rich.live import Live

            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
