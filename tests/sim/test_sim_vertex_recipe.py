"""docs/simulator.md's command-line recipe for the simulated Vertex AI, run as written (issue 44, item 10).

The Vertex AI section's command block is read from the page and each line run as a user would run it:
`evalkit sim … &` in the background (on a free port: `--port 0`, its URL read from the line it prints on
start and put where the page says 127.0.0.1:8000), `export` into the environment, then every
`evalkit run` line. Each run signs in with the key file the simulator wrote (google-auth's JWT grant
against the simulator's /token), answers every query and exits 0; the key file is its owner's only, and
the simulator refuses a bearer token it did not issue.

Each line is the `evalkit` command in a process of its own, forked from the suite's warm parent
(start_cli, run_cli: tests/cli_under_test.py) with the environment the lines build (the developer's
Google, Gemini, OpenAI and Anthropic variables left out): the lines' work without an interpreter start
and the SDKs' imports for each (the console script itself is run by test_packaging.py). The runs draw
no figures (run_cli's --no-plots: not what the recipe is about).
"""

from __future__ import annotations

import json
import re
import shlex
import stat
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from cli_under_test import run_cli, start_cli

import evalkit

DOCS = Path(evalkit.__file__).resolve().parents[1] / "docs" / "simulator.md"
EVALKIT = Path(sys.executable).parent / "evalkit"
DOC_URL = "http://127.0.0.1:8000"
NOT_THE_DEVELOPERS = ("GOOGLE", "GEMINI", "OPENAI", "ANTHROPIC")  # variables the lines' processes do not inherit


def _recipe() -> list[str]:
    """The command lines of the first indented block of the Vertex AI section that starts `evalkit sim`."""
    section = DOCS.read_text(encoding="utf-8").split("\n## Vertex AI", 1)[-1].split("\n## ", 1)[0]
    for block in re.findall(r"(?:^    \S.*\n)+", section, re.MULTILINE):
        lines = [line[4:] for line in block.splitlines()]
        if lines[0].startswith("evalkit sim"):
            return lines
    raise AssertionError("docs/simulator.md's Vertex AI section gives no command-line recipe (no block starting "
                         "`evalkit sim`)")


def _start_sim(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """The simulator started in the background, and the URL it says it listens on."""
    proc = start_cli(args, cwd=cwd, env=env, without=NOT_THE_DEVELOPERS)
    watchdog = threading.Timer(120, proc.kill)  # a simulator that never says it listens fails the test, not hangs it
    watchdog.start()
    said = []
    try:
        for line in proc.stdout:
            said.append(line)
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                return proc, found.group(1)
    finally:
        watchdog.cancel()
    raise AssertionError(f"the simulator did not start: {''.join(said)[-2000:]}{proc.communicate()[1][-2000:]}")


def test_the_vertex_recipe_runs_as_written(tmp_path) -> None:
    lines = _recipe()
    env = {"HOME": str(tmp_path / "home"), "NO_PROXY": "127.0.0.1", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    sim, url, runs = None, DOC_URL, []
    try:
        for line in lines:
            line = line.split("  #", 1)[0].strip()
            if line.startswith("evalkit sim") and line.endswith("&"):
                args = shlex.split(line.removesuffix("&"))[1:]
                args[args.index("--port") + 1] = "0"  # a free port: the page's 8000 may be taken
                sim, url = _start_sim(args, tmp_path, env)
            elif line.startswith("export "):
                env.update(dict(word.split("=", 1) for word in shlex.split(line)[1:]))
            elif line.startswith("evalkit run"):
                args = shlex.split(line.replace(DOC_URL, url))[1:]
                runs.append(run_cli(args, cwd=tmp_path, env=env, without=NOT_THE_DEVELOPERS, timeout=300))
            else:
                raise AssertionError(f"a line the test cannot run: {line}")
        assert sim is not None and runs, lines
        for done in runs:
            said = done.stdout + done.stderr
            assert done.returncode == 0, f"{done.args}\n{said[-3000:]}"
            assert re.search(r"queries (\d+) \(0 missing\)", said), said[-3000:]
            assert "errors 0" in said, said[-3000:]
        key_file = tmp_path / env["GOOGLE_APPLICATION_CREDENTIALS"]
        key = json.loads(key_file.read_text())
        assert key["type"] == "service_account" and key["token_uri"] == url + "/token"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        private = key["private_key"].splitlines()[1]  # a line of the key itself: never in a run's files
        for path in (tmp_path / "runs").rglob("*"):
            if path.is_file():
                assert private not in path.read_text(errors="replace"), path
        # signed in for real: a token the simulator did not issue is refused
        request = urllib.request.Request(url + "/v1/publishers/google/models/gemini-2.5-flash",
                                         headers={"Authorization": "Bearer ya29.not-issued"})
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30)
            status = 200
        except urllib.error.HTTPError as e:
            status = e.code
        assert status == 401
    finally:
        if sim is not None:
            sim.terminate()
            sim.communicate(timeout=30)


def test_a_key_file_the_simulator_did_not_write_is_never_replaced(tmp_path) -> None:
    real = tmp_path / "my-real-key.json"
    real.write_text(json.dumps({"type": "service_account", "client_email": "me@my-project.iam.gserviceaccount.com"}))
    before = real.read_bytes()
    done = subprocess.run([str(EVALKIT), "sim", "--port", "0", "--google-key-file", str(real)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is not a key file the simulator wrote" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert real.read_bytes() == before
