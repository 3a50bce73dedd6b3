"""A wheel built from a fresh clone, installed into a fresh venv, runs `evalkit demo` (proves packaging).

The wheel's own files go into the venv by pip; its dependencies are lent from the environment running
the tests (a .pth in the venv naming a folder of links to every installed package but evalkit itself),
so pip resolves the wheel's declared requirements against them (`--no-index`: one it lacks fails the
install) instead of unpacking ~370 MB of numpy, scipy, matplotlib and the SDKs again (58 s of the test's
64). That the SDKs come with a plain install is read from the installed wheel's own METADATA.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from synthetic_data import REPO

from evalkit import __version__


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return out


def _lend_dependencies(venv_python: Path, to: Path) -> Path:
    """A folder of links to everything installed beside this interpreter's packages except evalkit (its
    editable install and dist-info), named by a .pth in the venv: the venv's own site-packages, where
    the wheel goes, stays first on its path. Returns the venv's site-packages."""
    here = Path(sysconfig.get_paths()["purelib"])
    to.mkdir()
    for entry in here.iterdir():
        if not entry.name.lower().lstrip("_").startswith(("evalkit", "editable_impl_evalkit", "editable__")):
            (to / entry.name).symlink_to(entry)
    site = Path(_run([str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    (site / "_lent_dependencies.pth").write_text(f"{to}\n", encoding="utf-8")
    return site


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
    # compiling the wheel's bytecode up front (the demo compiles what it imports)
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = _lend_dependencies(python, tmp_path / "lent")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile", "--no-index",
          str(wheel)])
    workdir = tmp_path / "elsewhere"  # not the source tree: prompts/ and datasets/ must come from the wheel
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "VLLM", "PYTHON"))}
    # the evalkit the venv runs is the wheel's, in the venv's own site-packages
    found = _run([str(python), "-c", "import evalkit; print(evalkit.__file__)"], cwd=workdir, env=env).stdout
    assert Path(found.strip()).is_relative_to(site), found
    # the installed wheel has no git checkout around it: the plain version, as packaged
    assert wheel.name.startswith(f"evalkit-{__version__}-")
    assert _run([str(venv / "bin" / "evalkit"), "--version"], cwd=workdir, env=env).stdout == f"{__version__}\n"
    # a plain install serves the card's keyed providers: the wheel requires their SDKs (issue 44, item 11)
    (meta,) = site.glob("evalkit-*.dist-info/METADATA")
    plain = {Requirement(r).name for r in Parser().parsestr(meta.read_text(encoding="utf-8")).get_all("Requires-Dist")
             if Requirement(r).marker is None or Requirement(r).marker.evaluate({"extra": ""})}
    assert {"anthropic", "google-genai"} <= plain, plain
    _run([str(python), "-c", "import anthropic, google.genai"], cwd=workdir, env=env)
    out = _run([str(venv / "bin" / "evalkit"), "demo"], cwd=workdir, env=env)
    assert "accuracy" in out.stdout and "24 (0 missing)" in out.stdout
    report = workdir / "runs" / "demo" / "run" / "report.md"  # where the demo says it is, and kept
    assert f"report: {report.relative_to(workdir)}" in " ".join(out.stdout.split()) and report.is_file()
