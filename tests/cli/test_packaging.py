"""A wheel built from a fresh clone, installed into a fresh venv, runs `evalkit demo` (proves packaging)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from synthetic_data import REPO

from evalkit import __version__


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return out


@pytest.mark.slow
def test_wheel_from_fresh_clone_runs_demo(tmp_path):
    src = tmp_path / "clone"
    if (REPO / ".git").exists() and shutil.which("git"):
        _run(["git", "clone", "--quiet", str(REPO), str(src)])
    else:  # a source tree without git: copy what a clone would hold
        shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".ci-venv", "cache", "runs", "*.pyc"))
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(src)])
    wheel = next((tmp_path / "dist").glob("evalkit-*.whl"))
    venv = tmp_path / "venv"
    # an empty venv, filled by this interpreter's pip (--python: no pip bootstrapped into it), without
    # compiling every dependency's bytecode up front (the demo compiles what it imports): same install
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
           "--no-compile", str(wheel)]
    _run(pip)
    workdir = tmp_path / "elsewhere"  # not the source tree: prompts/ and datasets/ must come from the wheel
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "VLLM", "PYTHON"))}
    # the installed wheel has no git checkout around it: the plain version, as packaged
    assert wheel.name.startswith(f"evalkit-{__version__}-")
    assert _run([str(venv / "bin" / "evalkit"), "--version"], cwd=workdir, env=env).stdout == f"{__version__}\n"
    # a plain install serves the card's keyed providers: their SDKs came with it (issue 44, item 11)
    _run([str(venv / "bin" / "python"), "-c", "import anthropic, google.genai"], cwd=workdir, env=env)
    out = _run([str(venv / "bin" / "evalkit"), "demo"], cwd=workdir, env=env)
    assert "accuracy" in out.stdout and "24 (0 missing)" in out.stdout
    report = workdir / "runs" / "demo" / "run" / "report.md"  # where the demo says it is, and kept
    assert f"report: {report.relative_to(workdir)}" in " ".join(out.stdout.split()) and report.is_file()
