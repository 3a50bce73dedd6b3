"""`evalkit view RUN_DIR [RUN_DIR...] [--out DIR] [--serve [--port P]]`: write the results site.

Light at import (the CLI builds every subcommand's parser on start); the build is imported when run.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_view_parser(sub: Any) -> None:
    """Register `evalkit view` (the CLI calls this)."""
    p = sub.add_parser("view", help="a static site to read results by: overview, samples, one question at a time")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of one benchmark")
    p.add_argument("--out", help="folder for index.html and its files (default: RUN_DIR/view for one run, "
                   "runs/view-<bench> for several)")
    p.add_argument("--serve", action="store_true", help="then serve the folder on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=int, default=8765, help="--serve: the port (default 8765; 0: any free port)")


def cmd_view(args: argparse.Namespace, console: Any) -> int:
    from evalkit.core.errors import EvalkitError
    from evalkit.view.site import build_site

    if not 0 <= args.port <= 65535:
        raise EvalkitError(f"--port must be 0..65535, got {args.port}")
    site = build_site(args.run_dirs, args.out)
    t = site.thumbs
    console.print(f"wrote {site.index} ({site.questions:,} questions, {len(site.models)} "
                  f"model{'s' if len(site.models) != 1 else ''}; thumbnails: {t.made} made, {t.reused} reused"
                  + (f", {t.failed} unreadable" if t.failed else "") + ")", markup=False, highlight=False,
                  soft_wrap=True)  # paths and links whole on one line (rich breaks lines at the console's width)
    for note in site.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    if args.serve:
        from evalkit.view.serve import serve

        try:
            serve(site.out, args.port, lambda url: console.print(f"serving {url} (Ctrl-C stops)", markup=False,
                                                                 highlight=False, soft_wrap=True))
        except OSError as e:
            raise EvalkitError(f"cannot serve on 127.0.0.1:{args.port} ({e.strerror or e})") from e
    else:
        console.print(f"open {site.index.resolve().as_uri()}", markup=False, highlight=False, soft_wrap=True)
    return 0
