"""`evalkit lint BENCH --data PATH [--images DIR] [--json]`: the data's faults, before any money is spent.

Exit codes: 0 without error-level findings, 1 with, 2 for bad input (unknown benchmark, no such
data file or folder; one line naming it). Kept light at import (`evalkit --help` imports this
module): the engine is imported inside `cmd_lint`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_LISTED = 6  # item ids shown on a human line before "+N"
_ONE_BY_ONE = 5  # image files not found listed one by one; more are one line
NOT_FOUND = "image file not found"  # the message of a missing image (core.image_files.not_a_file)


def add_lint_parser(sub: Any) -> None:
    """Register `evalkit lint` on the CLI's subparsers."""
    p = sub.add_parser("lint", help="check a benchmark's data for faults that would silently distort a score",
                       description="Read the data through the benchmark's own loader, leniently, and report "
                                   "every fault: duplicate or contradictory questions, golds outside the options, "
                                   "empty or duplicate options, missing or broken images, balance and protocol "
                                   "checks. Exit 0 without error-level findings, 1 with, 2 for bad input.")
    p.add_argument("bench", metavar="BENCH", help="benchmark name (see `evalkit list`)")
    p.add_argument("--data", metavar="SOURCE", help="a data file or folder, hf://OWNER/NAME[@REVISION][/PATH] or "
                   "sample (default: the benchmark's official source, as for `evalkit run`)")
    p.add_argument("--images", metavar="DIR", help="folder the image paths are relative to (as for `evalkit run`)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--cache-dir", metavar="DIR", help="where the full result is kept for runs to reuse "
                                       "(default $EVALKIT_CACHE_DIR or ./cache, as for `evalkit run`)")
    p.add_argument("--no-cache", action="store_true", help="neither reuse nor keep a result")
    p.add_argument("--max-line-mb", type=float, metavar="MB", help="longest data line (JSONL line, TSV row, a JSON "
                   "file read whole) read, in MB (default 64, as for `evalkit run`)")
    p.add_argument("--max-image-mb", type=float, metavar="MB", help="largest image read, in MB (default 50, as for "
                   "`evalkit run`)")


def cmd_lint(args: argparse.Namespace, console: Any) -> int:
    from evalkit.core import read_caps
    from evalkit.core.errors import EvalkitError
    from evalkit.lint.engine import lint_data

    for flag, value, want_dir in (("--data", args.data, False), ("--images", args.images, True)):
        if value is None or (flag == "--data" and (value == "sample" or value.startswith("hf://"))):
            continue  # a source, not a path: resolved (and refused in one line) as `run` does
        path = Path(value).expanduser()
        if not path.exists():
            raise EvalkitError(f"{flag}: no such file or directory: {path}")
        if want_dir and not path.is_dir():
            raise EvalkitError(f"{flag}: not a directory: {path}")
    cache = None if args.no_cache else Path(args.cache_dir or os.environ.get("EVALKIT_CACHE_DIR") or "cache")
    line_mb, image_mb = getattr(args, "max_line_mb", None), getattr(args, "max_image_mb", None)
    for flag, mb in (("--max-line-mb", line_mb), ("--max-image-mb", image_mb)):
        if mb is not None and not (math.isfinite(mb) and mb > 0):
            raise EvalkitError(f"{flag} must be more than 0, not {mb:g}")
    with read_caps.using(line_mb, image_mb):
        report, reused = lint_data(args.bench, args.data, args.images, cache_dir=cache)
    if args.json:
        doc = {**report.to_dict(), "reused": reused}
        console.file.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    else:
        print_report(report, reused, console, images=args.images)
    return 1 if report.errors() else 0


def print_report(report: Any, reused: str | None, console: Any, images: str | None = None) -> None:
    """Findings grouped by severity, most severe first, one line each, then one summary line. Image
    files not found, when there are more than a few, are one line naming the folder looked in
    (`--json` lists each)."""
    from evalkit.core.findings import SEVERITIES
    from evalkit.lint.model import count_text

    for severity in SEVERITIES:
        group = [f for f in report.findings if f.severity == severity]
        if not group:
            continue
        console.print(f"[{STYLES[severity]}]{severity}s ({len(group)})[/]" if severity != "info"
                      else f"[{STYLES[severity]}]info ({len(group)})[/]", highlight=False)
        unfound = [f for f in group if f.kind == "image-missing" and f.message == NOT_FOUND]
        if len(unfound) > _ONE_BY_ONE:
            told = set(unfound)
            group = [f for f in group if f not in told]
            ids = [i for f in unfound for i in f.items]
            message = missing_images_line(unfound, report, images)
            console.print(_line(severity, "image-missing", "", message, ids), highlight=False, soft_wrap=True)
        for f in group:
            place = ", ".join(p for p in (f.file, f.where) if p)
            console.print(_line(severity, f.kind, place, f.message, list(f.items)), highlight=False, soft_wrap=True)
    how = f"full result of {reused}, data unchanged" if reused else "full check"
    console.print(f"lint {report.benchmark}: {count_text(report.counts)} in {report.n_items} items and "
                  f"{report.n_images} images ({how})", markup=False, highlight=False, soft_wrap=True)


def _line(severity: str, kind: str, place: str, message: str, items: list[str]) -> str:
    """One finding as a console line (rich markup, the data's text escaped)."""
    from rich.markup import escape

    ids = ""
    if items:
        shown = ", ".join(items[:_LISTED]) + (f" +{len(items) - _LISTED}" if len(items) > _LISTED else "")
        ids = f" [{shown}]"
    return f"  [{STYLES[severity]}]{severity:<7}[/] {escape(kind)}  {escape(place) + ': ' if place else ''}" \
           f"{escape(message)}{escape(ids)}"


def missing_images_line(unfound: list[Any], report: Any, images: str | None) -> str:
    """One message for many image files not found: how many, the folder they were looked for in (the
    nearest folder holding every such path) and what to do about it."""
    from evalkit.lint.engine import data_root

    root = data_root(Path(report.data))
    paths = [os.path.abspath(root / f.file) if f.file else str(root) for f in unfound]
    try:
        folder = os.path.commonpath([os.path.dirname(p) for p in paths])
    except ValueError:  # paths on different drives
        folder = str(root)
    where = (f"under {folder} (--images {images})" if images
             else f"under {folder} (image paths are read relative to the data's folder)")
    remedy = ("check that --images names the folder holding them" if images
              else "give --images DIR, the folder that holds them")
    return (f"{len(unfound):,} of {report.n_images:,} image files not found, looked for {where}; {remedy} "
            f"(each one: --json)")
