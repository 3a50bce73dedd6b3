"""`evalkit view`: a static site to read results by (overview, samples, one question at a time).

    import evalkit
    index = evalkit.build_view(["runs/a", "runs/b"], out="runs/view-mcq")   # -> Path of index.html

Importing it is light: the build is imported on use.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["build_view"]


def build_view(run_dirs: Sequence[str | Path], *, out: str | Path | None = None) -> Path:
    """Write the site for these run directories (one benchmark); returns the path of its index.html."""
    from evalkit.view.site import build_site

    return build_site(list(run_dirs), out).index
