"""evalkit's own download bar (huggingface_hub's bars are silenced): one rich bar per source on a
terminal, one line elsewhere, nothing when everything is cached (the bar is asked for only then)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def download_bar(label: str, total: int) -> Callable[[int], None] | None:
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        print(f"evalkit: downloading {label} ({total / 1e6:.1f} MB)", file=sys.stderr)
        return None
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   console=console, transient=True)
    task = bar.add_task(f"downloading {label}", total=total)
    bar.start()
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        bar.update(task, completed=done)
        if done >= total:
            bar.stop()

    return advance


def tqdm_bridge(advance: Callable[[int], None] | None) -> type:
    """A tqdm-shaped class huggingface_hub can drive, feeding evalkit's own progress bar (or nothing:
    huggingface_hub's own bars never print)."""
    if advance is None:
        def advance(n: int) -> None:
            return None

    class Bar:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.n = int(kwargs.get("initial") or 0)
            if self.n:
                advance(self.n)  # a resumed download counts what it already has

        def __enter__(self) -> Bar:
            return self

        def __exit__(self, *exc: Any) -> bool:
            return False

        def update(self, n: int | float | None = 1) -> None:
            self.n += int(n or 0)
            advance(int(n or 0))

        def close(self) -> None:
            pass

        def __getattr__(self, name: str) -> Any:  # set_description, refresh, ...: nothing to do
            return lambda *a, **k: None

    return Bar
