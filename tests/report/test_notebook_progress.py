"""Progress in a Jupyter notebook is one output line rewritten in place, not a line per refresh.

rich's console in a notebook is not a terminal, so a run printed its plain log lines there: each one
a new output under the cell (about eleven for a run). Now the line is shown once (IPython's display
with a display id) and updated. IPython is not installed in the test environment: a stand-in
records what is displayed, as the notebook would show it.
"""

from __future__ import annotations

import io
import sys
import types

from rich.console import Console

from evalkit.core.types import Outcome, Query, Response, Usage
from evalkit.report.progress import RunProgress


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


class Notebook:
    """What a notebook shows under the cell: outputs, each with its text; an update rewrites one."""

    def __init__(self) -> None:
        self.outputs: list[str] = []
        self.updates = 0

    def display(self, *objs, raw=False, display_id=None, **kwargs):
        for obj in objs:  # a raw mime bundle (evalkit's line), or an object rich displays (its HTML output)
            self.outputs.append(obj["text/plain"] if raw else obj._repr_mimebundle_((), ())["text/plain"])
        index = len(self.outputs) - 1
        notebook = self

        class Handle:
            def update(self, obj, raw=False, **kwargs):
                notebook.outputs[index] = obj["text/plain"]
                notebook.updates += 1

        return Handle() if display_id else None


def _outcome(cached: bool = False) -> Outcome:
    q = Query(id="q", item_id="q", base_id="q", variant={}, messages=(), gold="A")
    return Outcome(q, Response(text="A", usage=Usage(100, 2)), "k", cached)


def test_a_run_in_a_notebook_shows_one_updating_line(monkeypatch):
    notebook = Notebook()
    display = types.ModuleType("IPython.display")
    display.display = notebook.display
    ipython = types.ModuleType("IPython")
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    console = Console(force_jupyter=True, file=io.StringIO(), width=100)
    clock = Clock()
    with RunProgress(200, "mcq · vllm/m", console, clock=clock) as progress:
        for _ in range(200):
            clock.t += 0.1  # 20 s of answers: the plain mode's 10 s and 10% lines would each be an output
            progress.advance(_outcome())
    assert len(notebook.outputs) == 1, notebook.outputs  # one line under the cell
    assert "200/200" in notebook.outputs[0] and "mcq · vllm/m" in notebook.outputs[0]
    assert 10 <= notebook.updates <= 81  # rewritten as it went (at most 4 times a second), and at the end


def test_without_ipython_a_notebook_console_falls_back_to_plain_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    out = io.StringIO()
    with RunProgress(10, "mcq · vllm/m", Console(force_jupyter=True, file=out, width=100)) as progress:
        assert progress.mode == "plain"
        for _ in range(10):
            progress.advance(_outcome())
