"""The package's shape, as issue 43 fixed it: folders a newcomer can take in at a glance.

A folder past 20 modules is asking to be split (a sub-folder counts as one, `__init__.py` counts
too); the seam between the core path and its extensions is kept by `lint-imports` ("seam" in
pyproject.toml), and this checks the contract is still declared, so it cannot be dropped quietly.
"""

from __future__ import annotations

import sys
from pathlib import Path

from synthetic_data import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = REPO
PACKAGE = ROOT / "evalkit"


def _entries(folder: Path) -> list[str]:
    """Modules and sub-packages of one folder (what a reader scans when opening it)."""
    return sorted(p.name for p in folder.iterdir()
                  if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists()))


def test_no_folder_holds_more_than_20_modules() -> None:
    folders = [PACKAGE, *(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)]
    sizes = {str(f.relative_to(ROOT)): len(_entries(f)) for f in folders}
    assert len(sizes) > 30  # the inner folders are found
    too_big = {f: n for f, n in sizes.items() if n > 20}
    assert not too_big, f"folders past 20 modules: {too_big}"


def test_the_seam_contract_forbids_every_extension_to_the_core_path() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    seam = next(c for c in contracts if c["id"] == "seam")
    assert seam["type"] == "forbidden"
    assert set(seam["forbidden_modules"]) == {"evalkit.view", "evalkit.export", "evalkit.lint.command",
                                              "evalkit.sim", "evalkit.multi"}
    core = {"core", "images", "providers", "ask", "metrics", "grading", "money", "protocols", "data",
            "benchmarks", "report", "rundir", "engine"}
    assert {f"evalkit.{name}" for name in core} <= set(seam["source_modules"])
    # every lint module but the command is on the core path (a run lints its data at start)
    lint = {f"evalkit.lint.{p.stem}" for p in (PACKAGE / "lint").glob("*.py") if p.stem not in ("__init__", "command")}
    assert lint <= set(seam["source_modules"])
