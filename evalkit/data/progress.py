"""evalkit's own download bar (huggingface_hub's bars are silenced): one rich bar per source on a
terminal, one line elsewhere, nothing when everything is cached (the bar is asked for only then)."""

from __future__ import annotations

import sys
from collections.abc import Callable


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
