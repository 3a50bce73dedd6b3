"""A --suite file's [[models]] take `detail` and `media_resolution`, as the flags do: the same model listed
twice, once at `detail = "low"` and once without, is two runs in two run directories, and only the first
sends its images at low detail. A model with no such setting is one line naming the entry, exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_under_test import run_cli
from synthetic_data import colour_questions

from evalkit.sim.server import SimConfig, SimThread


def evalkit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, cwd=cwd, timeout=300, without=("EVALKIT_",))


def details(sim: SimThread) -> list[tuple]:
    """The `detail` of every image part of every chat request the simulator heard."""
    return [tuple(getattr(h, "image_detail", ())) for h in sim.heard if h.path.endswith("/chat/completions")]


def test_the_same_model_with_and_without_detail_is_two_runs(tmp_path):
    data = colour_questions(tmp_path / "d", 4)
    with SimThread(SimConfig()) as low, SimThread(SimConfig()) as default:
        suite = tmp_path / "suite.toml"
        suite.write_text(f'''
[[benchmarks]]
name = "mcq"
data = "{data}"

[[models]]
spec = "vllm/sim-model"
label = "low detail"
base_url = "{low.url}"
detail = "low"

[[models]]
spec = "vllm/sim-model"
label = "as the server reads it"
base_url = "{default.url}"
''', encoding="utf-8")
        done = evalkit(["run", "--suite", str(suite), "--out", "m", "--cache-dir", "cache", "--no-progress",
                        "--no-plots"], tmp_path)
        assert done.returncode == 0, done.stderr
        heard_low, heard_default = details(low), details(default)
    assert heard_low == [("low",)] * 4  # the first entry's requests: each image at low detail
    assert len(heard_default) == 4 and not any(filter(None, (x for d in heard_default for x in d)))  # none sent
    runs = sorted(p.parent for p in (tmp_path / "m").rglob("config.json"))
    assert len(runs) == 2, runs  # two runs, two run directories
    identities = [json.loads((r / "config.json").read_text())["identity"] for r in runs]
    assert sorted(str(i.get("detail")) for i in identities) == ["None", "low"]
    for r in runs:
        records = [json.loads(x) for x in (r / "records.jsonl").read_text().splitlines() if x.strip()]
        assert len(records) == 4 and all(x["error"] is None for x in records)


def test_a_model_without_the_setting_is_one_line_naming_the_entry(tmp_path):
    data = colour_questions(tmp_path / "d", 1)
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[benchmarks]]\nname = "mcq"\ndata = "{data}"\n\n[[models]]\nspec = "openai/gpt-4o"\n\n'
                     f'[[models]]\nspec = "anthropic/claude-sonnet-4-5"\nmedia_resolution = "low"\n', encoding="utf-8")
    done = evalkit(["run", "--suite", str(suite), "--out", "m", "--no-progress"], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "[[models]] #2 (anthropic/claude-sonnet-4-5)" in lines[0], done.stderr
    assert "--media-resolution" in lines[0] and "no such setting" in lines[0], done.stderr
    assert not (tmp_path / "m").exists()
