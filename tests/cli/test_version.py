"""`evalkit --version`: the version and the short git commit from a git checkout of evalkit, the plain
version anywhere else (an installed wheel, a copied package, a package inside someone else's
repository). Git runs only when the version is asked for, never when evalkit is imported.
(The installed wheel's plain version is checked in test_packaging.py, on the wheel it builds.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_data import REPO

from evalkit import __version__

CHECKOUT = re.compile(r"^0\.4\.0\.dev0 \(([0-9a-f]{7,})\)$")
PROBE = "import sys; from evalkit.cli import main; main(sys.argv[1:])"


def _evalkit(args: list[str], *, pythonpath: Path, cwd: Path, path: str | None = None) -> str:
    """`evalkit ARGS` through evalkit.cli.main in a fresh interpreter importing evalkit from `pythonpath`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PYTHON"))}
    env["PYTHONPATH"] = str(pythonpath)
    if path is not None:
        env["PATH"] = path
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _copy_package(dest: Path) -> Path:
    shutil.copytree(REPO / "evalkit", dest / "evalkit", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_the_version_is_0_3_0_in_the_package_and_in_pyproject():
    assert __version__ == "0.4.0.dev0"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^version = "([^"]+)"$', pyproject, re.MULTILINE).group(1) == __version__


@pytest.mark.skipif(not (REPO / ".git").exists() or shutil.which("git") is None,
                    reason="needs a git checkout of evalkit and git (a source tree without .git has no commit)")
def test_from_a_checkout_it_names_the_commit_and_runs_git_only_when_asked(tmp_path):
    # a `git` first on PATH that notes each call, then runs the real one
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "git-calls"
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {shutil.which("git")} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    elsewhere = tmp_path / "cwd"  # the commit is the package's checkout's, wherever evalkit is run from
    elsewhere.mkdir()

    assert "mcq" in _evalkit(["list"], pythonpath=REPO, cwd=elsewhere, path=path)
    assert not calls.exists(), "importing evalkit or another command ran git"

    out = _evalkit(["--version"], pythonpath=REPO, cwd=elsewhere, path=path)
    match = CHECKOUT.match(out.rstrip("\n"))
    assert match, out
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert match.group(1) == head
    assert len(calls.read_text().splitlines()) == 1


@pytest.mark.parametrize("where", ["copied", "copied-with-pyproject", "inside-another-repository"])
def test_outside_its_checkout_it_prints_the_plain_version(where, tmp_path):
    """A copy of the package (as an installed wheel holds it); one beside evalkit's pyproject.toml but
    not in a git tree (git fails); one in a folder of another project's git work tree."""
    root = tmp_path / "copy"
    if where == "inside-another-repository" and shutil.which("git"):
        outer = tmp_path
        subprocess.run(["git", "init", "-q", str(outer)], check=True)
        subprocess.run(["git", "-C", str(outer), "-c", "user.name=t", "-c", "user.email=t@example.org", "commit",
                        "-q", "--allow-empty", "-m", "another project"], check=True)
    _copy_package(root)
    if where != "copied":
        shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    assert _evalkit(["--version"], pythonpath=root, cwd=root) == "0.4.0.dev0\n"
