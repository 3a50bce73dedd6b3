"""Re-runs say what they do (issue 35 item 8): a resumed run names how many queries are already
answered and how many it asks; a run that asked nothing does not read as 6 cache misses; the lint
line is said once, before the asking."""

from __future__ import annotations

import json
from pathlib import Path

from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 6


def _data(tmp_path: Path) -> Path:
    """Six questions; the second has two options alike (not its gold): a lint warning."""
    data = make_mcq_jsonl(tmp_path / "d", N, seed=3)
    items = [json.loads(line) for line in data.read_text().splitlines()]
    wrong = [k for k in "ABCD" if k != items[1]["answer"]]
    items[1]["options"][wrong[0]] = items[1]["options"][wrong[1]]
    data.write_text("".join(json.dumps(x) + "\n" for x in items))
    return data


def _said(proc) -> str:  # noqa: ANN001
    return " ".join((proc.stdout + proc.stderr).split())


def test_a_resumed_run_says_what_it_asks_and_this_runs_counts(tmp_path):
    data = _data(tmp_path)
    out = tmp_path / "run"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        args = ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--base-url", sim.url,
                "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        first = run_main(args)
        assert first.returncode == 0, _said(first)
        said = _said(first)
        assert said.count("lint: 1 warning") == 1, said  # once, before the asking; lint.json has it
        assert "to ask" not in said
        assert json.loads((out / "summary.json").read_text())["this_run"] == {"sent": N, "from_cache": 0,
                                                                             "already": 0, "cost_usd": None}
        assert "this run 6 sent · 0 from the cache · 0 already answered" in said

        lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
        (out / "records.jsonl").write_text("".join(lines[:4]))  # two answers gone from the run
        again = run_main(args)
        said = _said(again)
        assert again.returncode == 0, said
        assert "evalkit: 4 already answered, 2 to ask" in said
        summary = json.loads((out / "summary.json").read_text())
        assert summary["this_run"] == {"sent": 0, "from_cache": 2, "already": 4, "cost_usd": 0.0}
        assert "this run 0 sent · 2 from the cache · 4 already answered" in said

        same = run_main(args)
        said = _said(same)
        assert same.returncode == 0, said
        assert "evalkit: all 6 queries already answered: nothing to ask" in said
        assert json.loads((out / "summary.json").read_text())["this_run"] == {"sent": 0, "from_cache": 0,
                                                                             "already": N, "cost_usd": 0.0}
        assert sim.counters.completions == N  # the first run's only
