"""`evalkit demo`: the whole pipeline, offline, in well under a minute.

Starts the simulated server with an answer key built from the bundled sample, then runs
the generic `mcq` benchmark against it through the real vLLM provider path, with the
simulated model's LLM-extractor acting as judge for answers the rules cannot parse.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from evalkit.engine.evaluate import RunResult
    from evalkit.sim.model import SimParams

DEMO_MODEL = "vllm/sim-model"


def run_demo(out: Path, console: Console, *, params: SimParams | None = None, plotter: Any = None) -> RunResult:
    # imported here, as every command's work is (cli/table.py): importing the cli package stays light
    from evalkit.engine.evaluate import run
    from evalkit.sim.from_bench import answer_key_for
    from evalkit.sim.model import SimParams
    from evalkit.sim.server import SimConfig, SimThread

    key = answer_key_for("mcq", {})
    sim_params = params or SimParams(theta=0.8, r=0.95, g=0.25, seed=7, style="mixed")
    config = SimConfig(answer_key=key, params=sim_params)
    console.print(f"evalkit demo: simulated model (theta={sim_params.theta}, r={sim_params.r}, "
                  f"style={sim_params.style}) on the bundled mcq sample, {len(key)} queries")
    with SimThread(config) as sim:
        # the simulator's port changes from run to run: a cache tag keeps the run's identity, so a second
        # demo in the same folder resumes there and sends nothing
        return run("mcq", DEMO_MODEL, base_url=sim.url, judge=DEMO_MODEL, judge_base_url=sim.url, cache_tag="evalkit-demo",
                   out=str(out / "run"), cache_dir=str(out / "cache"), console=console, progress=False,
                   plotter=plotter)
