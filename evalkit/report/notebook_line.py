"""One line of a Jupyter notebook's output, rewritten in place.

In a notebook rich's console is not a terminal: its live display needs ipywidgets, and evalkit's
plain progress lines (for logs) would each add an output under the cell. IPython's display with a
display id shows one output and replaces its text on each update, with nothing more installed.
"""

from __future__ import annotations

from typing import Any


class NotebookLine:
    """A text output under the running cell; `update` replaces its text."""

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
