"""evalkit's version, at the bottom of the layers so any module may record it (summary.json does).

`evalkit.__version__` re-exports it; pyproject.toml states the same string for packaging.

Nothing decides behaviour by this string: whether a run directory or a cache written by another
version is resumed is keyed on format markers (the run identity's `identity_version`, the cache
key's schema, the record fields), so a release can bump it freely. The lint result and the view's
parse memo hold it in their keys: a new version re-checks them once (they are recomputed, never
paid for).

`describe()` is what `evalkit --version` prints: the version, and the short git commit when evalkit
runs from a git checkout of itself. It runs git, so it is called only when the version is asked for,
never at import.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__version__ = "0.4.0.dev0"

GIT_TIMEOUT_S = 2.0
_NAME = re.compile(r'^name\s*=\s*"evalkit"\s*$', re.MULTILINE)
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def describe() -> str:
    """`0.4.0.dev0 (de344ad)` from a git checkout, the plain version from an installed wheel."""
    commit = checkout_commit()
    return f"{__version__} ({commit})" if commit else __version__


def checkout_commit(package: Path | None = None) -> str | None:
    """The short commit of the git checkout this evalkit package lives in, else None.

    A checkout is a git work tree whose top level is the package's parent folder and holds evalkit's
    pyproject.toml (an installed package's parent, site-packages, holds none, so no git runs for it).
    Any failure (no git, not a work tree, a slow or refusing git) gives None: the plain version."""
    root = (package or Path(__file__).resolve().parents[1]).parent
    try:
        if not _NAME.search((root / "pyproject.toml").read_text(encoding="utf-8")):
            return None
    except (OSError, UnicodeDecodeError):
        return None
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # the checkout's own .git only
    try:
        proc = subprocess.run(["git", "rev-parse", "--show-toplevel", "--short", "HEAD"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    lines = proc.stdout.split("\n")
    if proc.returncode != 0 or len(lines) < 2:
        return None
    commits = [line for line in lines if _COMMIT.match(line)]
    tops = [line for line in lines if line and not _COMMIT.match(line)]
    if len(commits) != 1 or len(tops) != 1:
        return None
    try:
        same = Path(tops[0]).resolve() == root.resolve()
    except OSError:
        return None
    return commits[0] if same else None
