"""The live progress line shows a service tier's capacity refusals beside the 429s (issue 45, item 1 follow-up):
"retries 7 (429: 0, flex refused 7)", as they happen, on a terminal (redrawn), in a log (plain lines) and on the
matrix's line per pair. A flex run where every second flex request is refused for capacity ("429 Resource
Unavailable") is driven through `evalkit.run` / `evalkit.run_matrix` with a console of the test's own, against
`evalkit sim`; the rendered text is read back. Where evalkit has no --service-tier (0.3.0), the tier is sent
with `--extra service_tier=flex` and the refusals are the server's 429s at the same share."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from synthetic_data import colour_questions

from evalkit import run, run_matrix
from evalkit.sim import SimConfig, SimFaults, SimThread
from evalkit.sim.from_bench import answer_key_for

try:
    from evalkit.sim import SimTiers
except ImportError:
    SimTiers = None

N = 8
KEY = "sk-tier-progress"
REFUSED = N - 1  # every second flex request refused, the last one served: 2N - 1 requests, N - 1 refusals


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return colour_questions(tmp_path / "ds", N)


def _sim(data: Path) -> SimConfig:
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))
    if SimTiers is not None:
        config.tiers = SimTiers(flex_refused=0.5)
    else:  # what 0.3.0 meets today: the server's 429s at the same share
        config.faults = SimFaults(rate=0.5, kinds=("429",), retry_after=0.01)
    return config


def _flex() -> dict:
    if SimTiers is None:
        return {"extra": {"service_tier": "flex"}, "max_attempts": 12}
    return {"service_tier": "flex", "tier_wait": 2.0}


def _console(terminal: bool) -> Console:
    return Console(file=io.StringIO(), width=300, force_terminal=terminal, color_system=None, force_jupyter=False)


def _text(console: Console) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", console.file.getvalue())


def _ask(sim: SimThread, data: Path, tmp_path: Path, console: Console, name: str):
    return run("mcq", "openai/gpt-4o", data=str(data), base_url=sim.url + "/v1", env={"OPENAI_API_KEY": KEY},
               out=str(tmp_path / name), cache_dir=str(tmp_path / f"cache-{name}"), plots=False, console=console,
               **_flex())


@pytest.mark.parametrize("terminal", [False, True], ids=["plain-lines", "terminal"])
def test_the_progress_line_shows_the_tiers_refusals_beside_the_429s(data, tmp_path, terminal):
    console = _console(terminal)
    with SimThread(_sim(data)) as sim:
        done = _ask(sim, data, tmp_path, console, "run")
    assert done.exit_code == 0, done.messages
    lines = [ln for ln in _text(console).splitlines() if "mcq · openai/gpt-4o · " in ln and "retries" in ln]
    assert lines, _text(console)
    last = lines[-1]  # the line as the run ended
    assert f"{N}/{N}" in last and f"retries {REFUSED} (429: 0, flex refused {REFUSED})" in last, last
    assert done.summary["throughput"]["capacity_refused"] == REFUSED


def test_a_run_without_refusals_shows_the_429s_as_before(data, tmp_path):
    console = _console(False)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        done = _ask(sim, data, tmp_path, console, "run")
    assert done.exit_code == 0, done.messages
    last = [ln for ln in _text(console).splitlines() if "retries" in ln][-1]
    assert "retries 0 (429: 0)" in last and "refused" not in last, last


def test_the_matrix_line_of_a_pair_shows_its_tiers_refusals(data, tmp_path):
    console = _console(True)
    with SimThread(_sim(data)) as sim:
        result = run_matrix(["mcq"], ["openai/gpt-4o"], data=str(data), base_url=sim.url + "/v1",
                            env={"OPENAI_API_KEY": KEY}, out=tmp_path / "m", cache_dir=str(tmp_path / "cache"),
                            plots=False, console=console, **_flex())
    assert result.exit_code == 0, [p.error for p in result.pairs]
    rows = [ln for ln in _text(console).splitlines() if ln.startswith("mcq · openai/gpt-4o") and "retries" in ln]
    assert rows, _text(console)
    assert f"{N}/{N}" in rows[-1] and f"(429: 0, flex refused {REFUSED})" in rows[-1], rows[-1]
