"""Live progress for a run: what a user waiting on it needs, at any terminal width.

On a terminal: one line, redrawn four times a second. Its fields are chosen by importance and
dropped from the least important when the terminal is narrow (count, ETA and elapsed survive 80
columns; the bar, tokens and the label go first). Retries, rate limits and errors are counted as
they happen (from the runner's counters), not when a query finally ends, a service tier's capacity refusals
beside the 429s ("429: 0, flex refused 3": they are not the account's limit), and the cost so far is
shown when prices are known. When stderr is not a terminal (a log file, CI, `2>run.log`), a plain
line is printed every 10 s or every 10% of the queries, and once at the end. In a Jupyter notebook
it is one output line under the cell, rewritten in place (NotebookLine: rich's live display needs
ipywidgets there, and IPython's display with a display id replaces one output's text with nothing
more installed).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from evalkit.core.types import Outcome

PLAIN_EVERY_S = 10.0
NOTEBOOK_EVERY_S = 0.25  # the notebook line is rewritten at most this often (and once at the end)
NOTEBOOK_WIDTH = 140  # an output under a cell is wider than rich's default notebook width (115): keep the label
RATE_WINDOW_S = 30.0


class Counters(Protocol):
    """What the runner counts as it goes (ask.runner.RunnerStats)."""

    retries: int
    rate_limited: int
    capacity_refused: int  # a service tier's capacity refusals (ask.capacity): shown apart from the 429s


@dataclass(frozen=True)
class Field:
    text: str
    priority: int  # lower survives longer


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def fit_fields(fields: list[Field], width: int, bar: Callable[[int], str] | None = None) -> str:
    """The fields that fit in `width` columns (most important kept), in their given order, joined by
    " · "; what room is left goes to the bar (placed first), if one is given and at least 10 wide."""
    sep = " · "
    kept = sorted(range(len(fields)), key=lambda i: fields[i].priority)
    while kept and len(sep.join(fields[i].text for i in sorted(kept))) > width:
        kept.pop()
    line = sep.join(fields[i].text for i in sorted(kept))
    room = width - len(line) - 1
    if bar is not None and room >= 10 and len(kept) == len(fields):
        line = bar(min(room, 40)) + " " + line
    return line


class RunProgress:
    """Progress of `total` queries: a redrawn line on a terminal, plain lines otherwise, or nothing."""

    def __init__(self, total: int, label: str, console: Console | None = None, enabled: bool = True, *,
                 counters: Counters | None = None, spent: Callable[[], float | None] | None = None,
                 clock: Callable[[], float] = time.monotonic, plain_every_s: float = PLAIN_EVERY_S,
                 status: Callable[[], str | None] | None = None, tier: str | None = None):
        self.console = console or Console(stderr=True)
        self.tier = tier  # the service tier asked for (--service-tier): whose capacity refusals are counted
        self.total, self.label = total, label
        self.done = self.hits = self.errors = self.tokens = 0
        self.counters, self.spent, self.clock = counters, spent, clock
        self.status = status  # e.g. batches: how many, lines waiting, the provider's word
        self.mode = ("off" if not enabled else "notebook" if self.console.is_jupyter
                     else "live" if self.console.is_terminal else "plain")
        self.plain_every_s = plain_every_s
        self._start = self._last_line = clock()
        self._last_tenth = 0
        self._samples: deque[tuple[float, int]] = deque()  # (time, answered-not-from-cache) for the rate
        self._sent = 0
        self._live: Any = None
        self._notebook: NotebookLine | None = None  # the notebook's line

    # ---- what is shown -------------------------------------------------------------------
    def rate(self) -> float | None:
        """Queries per second over the last RATE_WINDOW_S (cache hits, which come at once, left out)."""
        if len(self._samples) < 2:
            return None
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def fields(self) -> list[Field]:
        now = self.clock()
        rate = self.rate()
        left = self.total - self.done
        eta = 0.0 if left == 0 else left / rate if rate else None
        out = [Field(self.label, 9), Field(f"{self.done:,}/{self.total:,}", 0)]
        out.append(Field(f"{rate:.1f}/s" if rate is not None else "–/s", 3))
        out += [Field(f"{_clock(now - self._start)} elapsed", 2), Field(f"ETA {_clock(eta)}", 1)]
        status = self.status() if self.status is not None else None
        if status:
            out.append(Field(status, 2))
        c = self.counters
        retries, limited, refused = (c.retries, c.rate_limited, c.capacity_refused) if c is not None else (0, 0, 0)
        apart = f", {self.tier or 'tier'} refused {refused:,}" if refused else ""  # not the account's 429s
        out.append(Field(f"errors {self.errors:,} · retries {retries:,} (429: {limited:,}{apart})", 4))
        spent = self.spent() if self.spent is not None else None
        if spent is not None:
            out.append(Field(f"${spent:,.4f}", 5))
        out += [Field(f"cache {self.hits:,}", 6), Field(f"tokens {self.tokens:,}", 7)]
        return out

    def line(self, width: int) -> str:
        share = self.done / self.total if self.total else 1.0

        def bar(n: int) -> str:
            full = int(share * n)
            return "━" * full + "╺" * (full < n) + " " * max(0, n - full - 1)

        return fit_fields(self.fields(), width, bar)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.line(options.max_width), no_wrap=True, overflow="crop")

    # ---- updates -------------------------------------------------------------------------
    def advance(self, outcome: Outcome) -> None:
        self.done += 1
        self.hits += outcome.cached
        self.errors += not outcome.response.ok
        if not outcome.cached:
            self.tokens += outcome.response.usage.input_tokens + outcome.response.usage.output_tokens
            self._sent += 1
            now = self.clock()
            self._samples.append((now, self._sent))
            while len(self._samples) > 2 and now - self._samples[0][0] > RATE_WINDOW_S:
                self._samples.popleft()
        if self.mode == "plain":
            self._maybe_plain()
        elif self._notebook is not None and self.clock() - self._last_line >= NOTEBOOK_EVERY_S:
            self._last_line = self.clock()
            self._notebook.update(self._notebook_text())

    def _notebook_text(self) -> str:
        return self.line(max(self.console.width, NOTEBOOK_WIDTH))

    def _maybe_plain(self) -> None:
        now = self.clock()
        tenth = int(10 * self.done / self.total) if self.total else 10
        if now - self._last_line >= self.plain_every_s or (tenth > self._last_tenth and self.done < self.total):
            self._print_plain(now, tenth)

    def _print_plain(self, now: float, tenth: int) -> None:
        self._last_line, self._last_tenth = now, tenth
        self.console.print(f"evalkit: {fit_fields(self.fields(), 10_000)}", markup=False, highlight=False,
                           soft_wrap=True)

    def __enter__(self) -> RunProgress:
        if self.mode == "live":
            from rich.live import Live

            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.start()
        elif self.mode == "notebook":
            self._notebook = notebook_line(self._notebook_text())
            if self._notebook is None:  # no IPython to show it with: plain lines, as in a log
                self.mode = "plain"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self._notebook is not None:
            self._notebook.update(self._notebook_text())
            self._notebook = None
        elif self.mode == "plain" and self.done:
            self._print_plain(self.clock(), 10)


class NotebookLine:
    """A text output under the running notebook cell; `update` replaces its text."""

    def __init__(self, text: str) -> None:
        from IPython.display import display  # present wherever a notebook runs

        self._handle: Any = display({"text/plain": text}, raw=True, display_id=True)

    def update(self, text: str) -> None:
        self._handle.update({"text/plain": text}, raw=True)


def notebook_line(text: str) -> NotebookLine | None:
    """The line, or None where IPython cannot be imported (a console told it is Jupyter elsewhere)."""
    try:
        return NotebookLine(text)
    except ImportError:
        return None
