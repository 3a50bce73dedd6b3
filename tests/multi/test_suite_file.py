"""`evalkit run --suite FILE` (issue 33 item 2): a TOML file of [[benchmarks]] and [[models]] with each
model's own settings (base_url, label, extra, repeats), flags overriding the file; a bad file is one
line naming the file, the entry and the key, exit 2, and nothing is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.multi.suite import read_suite
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def _config(run: Path) -> dict:
    return json.loads((run / "config.json").read_text())["config"]


def test_a_suite_gives_each_model_its_own_server_and_settings_and_flags_override_it(tmp_path, capfd):
    data = make_mcq_jsonl(tmp_path / "d", 3, seed=21)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key)) as a, SimThread(SimConfig(answer_key=key)) as b:
        suite = tmp_path / "suite.toml"
        suite.write_text(f'''
[[benchmarks]]
name = "mcq"
data = "{data}"

[[models]]
spec = "vllm/sim-model"
label = "first"
base_url = "{a.url}"
extra = {{ top_k = 1 }}

[[models]]
spec = "vllm/sim-model"
label = "second"
base_url = ["{b.url}"]
repeats = 2
''')
        code = main(["run", "--suite", str(suite), "--extra", '{"top_k": 3}', "--out", str(tmp_path / "m"),
                     "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--no-plots"])
        asked = (a.counters.completions, b.counters.completions)
    said = capfd.readouterr()
    assert code == 0, said.err
    assert asked == (3, 6)  # each model its own server; the second asks every query twice (repeats = 2)
    runs = {_config(p)["endpoint"]: _config(p) for p in (tmp_path / "m").glob("mcq-*")}
    first, second = runs[a.url + "/v1"], runs[b.url + "/v1"]
    assert first["generation"]["extra"] == second["generation"]["extra"] == {"top_k": 3}  # the flag wins
    assert second["repeats"] == 2 and "repeats" not in first
    ranking = json.loads((tmp_path / "m" / "compare-mcq" / "comparison.json").read_text())["ranking"]
    assert sorted(ranking) == ["first", "second"]
    assert "mcq · first: accuracy" in said.out and "mcq · second: accuracy" in said.out


BAD = [
    ("title = 'x'\n", "unknown key 'title' (a suite has [[benchmarks]] and [[models]])"),
    ("[[models]]\nspec = 'vllm/sim-model'\ntemperature = 0.5\n",
     "[[models]] #1 (vllm/sim-model): unknown key 'temperature' (known: spec, label, base_url, extra, "
     "reasoning_effort, detail, media_resolution, repeats)"),
    ("[[benchmarks]]\nname = 'mcq'\noptions = { lang = 'cn' }\n",
     "[[benchmarks]] #1 (mcq): unknown option 'lang' of mcq (known: circular, rotations)"),
    ("[[benchmarks]]\nname = 'mmlu'\n", "[[benchmarks]] #1 (mmlu): unknown benchmark"),
    ("[[models]]\nspec = 'vllm/sim-model'\nrepeats = 'two'\n",
     "[[models]] #1 (vllm/sim-model): option 'repeats' must be an integer"),
    ("[[models]]\nspec = 'vllm/sim-model'\nrepeats = 0\n", "[[models]] #1 (vllm/sim-model): --repeats must be at least 1"),
    ("[[models]]\nlabel = 'x'\n", "[[models]] #1: 'spec' is missing"),
    ("[[models]\nspec = 'x'\n", "not valid TOML"),
]


@pytest.mark.parametrize(("text", "expected"), BAD, ids=[b[1].split(":")[0][:40] for b in BAD])
def test_a_bad_suite_is_named_in_one_line(tmp_path, text, expected):
    path = tmp_path / "suite.toml"
    path.write_text(text)
    with pytest.raises(EvalkitError) as e:
        read_suite(path)
    assert str(e.value).startswith(f"{path}: ") or str(e.value).startswith(f"--suite {path}: "), e.value
    assert expected in str(e.value)
    assert "\n" not in str(e.value)


def test_a_bad_suite_stops_the_command_before_anything_is_sent(tmp_path, capfd):
    data = make_mcq_jsonl(tmp_path / "d", 2, seed=22)
    with SimThread(SimConfig()) as sim:
        suite = tmp_path / "suite.toml"
        suite.write_text(f'[[benchmarks]]\nname = "mcq"\ndata = "{data}"\n\n[[models]]\nspec = "vllm/sim-model"\n'
                         f'base_url = "{sim.url}"\n\n[[models]]\nspec = "vllm/other"\nbase_url = "{sim.url}"\n'
                         'seed = 3\n')
        code = main(["run", "--suite", str(suite), "--out", str(tmp_path / "m"), "--cache-dir",
                     str(tmp_path / "cache"), "--no-progress"])
        missing = main(["run", "--suite", str(tmp_path / "nope.toml"), "--no-progress"])
        requests = sim.counters.snapshot()["requests"]
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert code == missing == 2 and requests == 0
    assert err == [f"evalkit: error: {suite}: [[models]] #2 (vllm/other): unknown key 'seed' (known: spec, label, "
                   "base_url, extra, reasoning_effort, detail, media_resolution, repeats)",
                   f"evalkit: error: --suite {tmp_path / 'nope.toml'}: no such file"]
    assert not (tmp_path / "m").exists()
