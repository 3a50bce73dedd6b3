"""A suite run again with nothing to send redoes no run's work (issue 44, item 13).

Counted in work, not wall time (the machine is shared): the second `evalkit run --suite` of two
models, every answer recorded and the server gone, must leave each run's records.jsonl and
manifest.json as they were (not re-graded and rewritten: the same file, not a copy with the same
bytes; summary.json's `this_run` and report.md's cost row say what this command did and paid) and
still print every pair's line. 0.3.0 took the full path for a matrix's pair: each run's records
were re-read, re-graded and rewritten.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_under_test import run_cli
from PIL import Image

from evalkit.sim import SimConfig, SimThread

WRITTEN = ("records.jsonl", "manifest.json")  # summary.json and report.md say what this command did (and paid)


def _data(folder: Path, n: int) -> Path:
    """n four-option questions, each over its own small picture."""
    (folder / "images").mkdir(parents=True)
    lines = []
    for i in range(n):
        Image.new("RGB", (32, 32), (40 * (i % 6), 90, 200 - 10 * i)).save(folder / "images" / f"img{i}.png")
        lines.append(json.dumps({"id": f"q{i}", "image": f"images/img{i}.png", "question": f"Question {i}?",
                                 "options": {"A": "red", "B": "green", "C": "blue", "D": "grey"},
                                 "answer": "ABCD"[i % 4], "category": f"cat{i % 3}"}) + "\n")
    (folder / "data.jsonl").write_text("".join(lines), encoding="utf-8")
    return folder / "data.jsonl"


def _files(run: Path) -> dict[str, tuple[int, int]]:
    """Each written file's inode and modification time: a rewrite (even of the same bytes) changes them."""
    return {name: ((run / name).stat().st_ino, (run / name).stat().st_mtime_ns) for name in WRITTEN}


def _pair_lines(out: str) -> list[str]:
    """Each pair's line up to its errors (its cost says what this command paid): name, score, answered."""
    return [" · ".join(line.split(" · ")[:4]) for line in out.splitlines() if line.startswith("mcq · m")]


def test_a_suite_run_again_with_nothing_to_send_rewrites_no_run(tmp_path):
    data = _data(tmp_path / "ds", 12)
    suite, out = tmp_path / "suite.toml", tmp_path / "out"
    args = ["run", "--suite", str(suite), "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    env = {"VLLM_API_KEY": "sk-suite"}
    with SimThread(SimConfig()) as sim:
        suite.write_text(f'[[benchmarks]]\nname = "mcq"\ndata = "{data}"\n' + "".join(
            f'\n[[models]]\nspec = "vllm/sim-model"\nlabel = "m{i}"\nbase_url = "{sim.url}/v1"\n'
            f"extra = {{ top_k = {i + 1} }}\n" for i in range(2)), encoding="utf-8")
        first = run_cli(args, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    runs = sorted(p.parent for p in out.glob("*/records.jsonl"))
    assert len(runs) == 2
    before = {run: _files(run) for run in runs}
    summaries = {run: json.loads((run / "summary.json").read_text(encoding="utf-8")) for run in runs}

    again = run_cli(args, env=env)  # the server is gone: nothing may be sent
    assert again.returncode == 0, again.stdout + again.stderr
    assert _pair_lines(again.stdout) == _pair_lines(first.stdout)
    for run in runs:
        assert json.loads((run / "summary.json").read_text(encoding="utf-8"))["metrics"] == summaries[run]["metrics"]
        assert _files(run) == before[run], f"{run.name}: the run was re-graded and rewritten with nothing to send"
