"""Figures drawn before are copied from the cache folder, not drawn again (issue 35 item 16;
report/figure_memo.py), and a run whose answers all come from the cache starts no plot process."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

import evalkit.report.figure_memo as figure_memo
import evalkit.report.figures as figures
from evalkit.engine.evaluate import run
from evalkit.report.figure_memo import FigureMemo
from evalkit.report.figures import STAMP, PlannedFigure, draw_all
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


@pytest.fixture
def fake_figures(monkeypatch):
    """Two figures whose drawing writes the digest into each (counted); the digest is set by the test."""
    state = {"digest": "d1", "drawn": 0}

    def plan(plot_dir, results):
        def drawer(path: Path):
            def draw() -> Path:
                state["drawn"] += 1
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{path.name} of {state['digest']}")
                return path
            return draw
        return [PlannedFigure(name, Path(plot_dir) / name, drawer(Path(plot_dir) / name)) for name in ("a.png", "b.png")]

    monkeypatch.setattr(figures, "plan_figures", plan)
    monkeypatch.setattr(figures, "inputs_digest", lambda results: state["digest"])
    return state


def test_the_same_figures_are_copied_other_figures_drawn(tmp_path, fake_figures, monkeypatch):
    memo = tmp_path / "cache" / "figures"
    draw_all(tmp_path / "run1" / "plots", [], memo=memo)
    assert fake_figures["drawn"] == 2 and (memo / "d1" / "a.png").read_text() == "a.png of d1"

    out = draw_all(tmp_path / "run2" / "plots", [], memo=memo)  # another run directory, the same figures
    assert fake_figures["drawn"] == 2
    assert [p.read_text() for _, p in out] == ["a.png of d1", "b.png of d1"]
    assert (tmp_path / "run2" / "plots" / STAMP).read_text().strip() == "d1"

    fake_figures["digest"] = "d2"  # what they show changed: drawn
    draw_all(tmp_path / "run3" / "plots", [], memo=memo)
    assert fake_figures["drawn"] == 4 and (tmp_path / "run3" / "plots" / "a.png").read_text() == "a.png of d2"

    (memo / "d2" / "b.png").unlink()  # a kept set missing a figure is not used
    draw_all(tmp_path / "run4" / "plots", [], memo=memo)
    assert fake_figures["drawn"] == 6 and (memo / "d2" / "b.png").is_file()  # and kept whole again

    monkeypatch.setattr(figure_memo, "KEEP", 2)
    for digest in ("d3", "d4"):
        fake_figures["digest"] = digest
        draw_all(tmp_path / f"run-{digest}" / "plots", [], memo=memo)
    assert sorted(p.name for p in memo.iterdir()) == ["d3", "d4"]  # the newest sets are kept
    assert not FigureMemo(memo).copy_out("d1", [tmp_path / "x" / "a.png"])


class _Plotter:
    def __init__(self) -> None:
        self.started = 0

    def start(self) -> None:
        self.started += 1

    def draw(self, plot_dir, results):
        return None  # drawn here


def test_a_run_answered_from_the_cache_starts_no_plot_process(tmp_path, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=2)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        args = dict(data=str(data), base_url=sim.url, cache_dir=str(tmp_path / "cache"), quiet=True)
        cold, warm = _Plotter(), _Plotter()
        run("mcq", "vllm/sim-model", out=str(tmp_path / "a"), plotter=cold, **args)
        run("mcq", "vllm/sim-model", out=str(tmp_path / "b"), plotter=warm, **args)
    assert cold.started == 1 and warm.started == 0
