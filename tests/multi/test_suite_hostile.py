"""Hostile suite files and repeat counts (issue 44 item 8): a TOML nested past the parser's depth is one
line and exit 2, not a RecursionError traceback; a label holding control characters, or megabytes of
text, is echoed escaped and shortened, never raw; `repeats` past the cap (1,000), in a suite or as
`--repeats`, is refused in one line naming the flag and the file, before anything is expanded."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from cli_under_test import checkout_under_test, run_cli

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

_MAIN = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
         "from evalkit.cli import main; sys.exit(main(sys.argv[1:]))")
MEMORY_CAP = 3 << 30  # an evalkit that expands a billion repeats hits this (MemoryError) instead of the machine


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[-2000:]
    assert "Traceback" not in err
    return lines[0]


def test_a_suite_nested_too_deeply_or_with_a_huge_wrong_value_is_one_short_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("[[benchmarks]]\nname = \"mcq\"\n\n[[models]]\nspec = \"vllm/sim-model\"\nextra = { a = "
                    + "[" * 50_000 + "]" * 50_000 + " }\n")
    said = run_cli(["run", "--suite", str(deep), "--no-progress"])
    assert said.returncode == 2, said.stderr[-2000:]
    assert _one_line(said.stderr) == f"evalkit: error: --suite {deep}: not valid TOML: nested too deeply"

    typed = tmp_path / "typed.toml"  # a label of the wrong type, 100,000 characters long, ESC inside
    typed.write_text("[[benchmarks]]\nname = \"mcq\"\n\n[[models]]\nspec = \"vllm/sim-model\"\n"
                     f"label = [\"\\u001b[2J{'x' * 100_000}\"]\n")
    said = run_cli(["run", "--suite", str(typed), "--no-progress"])
    line = _one_line(said.stderr)
    assert said.returncode == 2 and f"{typed}: [[models]] #1 (vllm/sim-model): 'label' must be" in line
    assert len(line) < 300 + len(str(typed)) and "\x1b" not in line


def test_labels_with_control_characters_or_megabytes_are_escaped_and_shortened(tmp_path):
    key = answer_key_for("mcq", {})
    long_label = "L" * 1_000_000
    with SimThread(SimConfig(answer_key=key)) as sim:
        suite = tmp_path / "suite.toml"
        suite.write_text(f'''
[[benchmarks]]
name = "mcq"

[[models]]
spec = "vllm/sim-model"
label = "red\\u001b[31m\\u001b[2Jbell\\u0007"
base_url = "{sim.url}"

[[models]]
spec = "vllm/sim-other"
label = "{long_label}"
base_url = "{sim.url}"
''')
        said = run_cli(["run", "--suite", str(suite), "--limit", "3", "--out", str(tmp_path / "m"), "--cache-dir",
                        str(tmp_path / "cache"), "--no-progress"], timeout=240)
        asked = sim.counters.completions
    shown = said.stdout + said.stderr
    assert said.returncode == 0, said.stderr[-2000:]
    assert asked == 6  # both models answered every question: the labels changed nothing but their display
    assert "\x1b" not in shown and "\x07" not in shown  # nothing raw reaches the terminal
    assert "mcq · red\\u001b[31m\\u001b[2Jbell\\u0007: accuracy" in said.stdout  # escaped as JSON spells it
    assert f"mcq · {'L' * 79}…: accuracy" in said.stdout  # 80 characters of the label, then "…"
    assert len(shown) < 20_000  # not the megabyte, once per line naming the pair
    assert max(map(len, shown.splitlines())) < 400


def _run_capped(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`evalkit ARGS` in a child whose address space is capped: an evalkit that holds a billion repeats
    fails or times out instead of taking the machine's memory."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    env = {**os.environ, "PYTHONPATH": str(checkout_under_test()), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-c", _MAIN, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120, preexec_fn=cap)


def test_a_billion_repeats_is_refused_in_one_line_from_the_flag_and_from_a_suite(tmp_path):
    key = answer_key_for("mcq", {})
    with SimThread(SimConfig(answer_key=key)) as sim:
        flag = _run_capped(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--repeats",
                            "1000000000", "--out", str(tmp_path / "r"), "--no-progress", "--no-plots"], tmp_path)
        suite = tmp_path / "suite.toml"
        suite.write_text(f'[[benchmarks]]\nname = "mcq"\n\n[[models]]\nspec = "vllm/sim-model"\n'
                         f'base_url = "{sim.url}"\nrepeats = 1000000000\n\n[[models]]\nspec = "vllm/sim-other"\n'
                         f'base_url = "{sim.url}"\n')
        filed = _run_capped(["run", "--suite", str(suite), "--out", str(tmp_path / "m"), "--no-progress",
                             "--no-plots"], tmp_path)
        requests = sim.counters.snapshot()["requests"]
    assert flag.returncode == 2, flag.stderr[-2000:]
    assert _one_line(flag.stderr) == "evalkit: error: --repeats must be at most 1,000, not 1,000,000,000"
    assert filed.returncode == 2, filed.stderr[-2000:]
    assert _one_line(filed.stderr) == (f"evalkit: error: {suite}: [[models]] #1 (vllm/sim-model): --repeats must be "
                                       "at most 1,000, not 1,000,000,000")
    assert requests == 0 and not (tmp_path / "r").exists() and not (tmp_path / "m").exists()
    # the cap itself is a valid count
    said = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9/v1", "--repeats",
                    "1000", "--dry-run", "--limit", "1", "--no-progress"])
    assert said.returncode == 0, said.stderr[-2000:]
