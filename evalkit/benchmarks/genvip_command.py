"""`evalkit translate`: GenViP's infrared-to-RGB translations of IF-Bench images, made once with an
image editor (resumable, cached), for the GenViP variants of a run (ifbench_genvip.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.core.settings import RunConfig


def add_translate_parser(sub: Any) -> None:
    tp = sub.add_parser("translate", help="GenViP: translate infrared images to RGB with an editor")
    tp.add_argument("bench", choices=("if-bench",), help="benchmark whose images to translate")
    tp.add_argument("--images", required=True, help="folder of infrared images")
    tp.add_argument("--out", required=True, help="folder for the translations (resumable)")
    tp.add_argument("--model", required=True, help="editor, e.g. openai/gpt-image-1 or google/gemini-2.5-flash-image")
    tp.add_argument("--data", help="question file: translate only the images it names")
    tp.add_argument("--base-url", action="append", help="editor server URL")
    tp.add_argument("--concurrency", type=int, default=8, help="images in flight (default 8)")
    tp.add_argument("--rpm", type=float, help="requests per minute ceiling")
    tp.add_argument("--max-attempts", type=int, default=6, help="attempts per image for retryable errors (default 6)")
    tp.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    tp.add_argument("--limit", type=int, help="only the first N images")
    tp.add_argument("--cache-dir", default=None, help="response cache folder (default ./cache or EVALKIT_CACHE_DIR)")
    tp.add_argument("--no-cache", action="store_true", help="neither read nor write the response cache")
    tp.add_argument("--no-progress", action="store_true", help="no live progress bar")


def cmd_translate(args: argparse.Namespace, console: Console) -> int:
    import asyncio

    from evalkit.benchmarks.ifbench_genvip import translate_images

    results = asyncio.run(translate_images(
        Path(args.images), Path(args.out), args.model, data=Path(args.data) if args.data else None,
        base_urls=tuple(args.base_url or ()), cache_dir=None if args.no_cache else RunConfig(cache_dir=args.cache_dir).cache_path(os.environ),
        concurrency=args.concurrency, max_attempts=args.max_attempts, timeout_s=args.timeout, limit=args.limit,
        rpm=args.rpm, progress=not args.no_progress))
    failed = [r for r in results if not r.ok]
    sources = {s: sum(1 for r in results if r.ok and r.source == s) for s in ("network", "cache", "output")}
    console.print(f"translated {len(results) - len(failed)}/{len(results)} images into {args.out} "
                  f"(new {sources['network']}, from cache {sources['cache']}, already there {sources['output']})")
    for r in failed[:5]:
        console.print(f"[red]{r.id}: {r.error} {r.error_message or ''}[/red]")
    return 1 if failed else 0
