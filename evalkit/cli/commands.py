"""What each `evalkit` subcommand does: call the Python API, print what it returned, give the exit code.

Each `cmd_*` has the command table's shape (cli/table.py): `(args, console) -> exit code`. Each imports
what it needs when it runs, so that building the parser (and `--help`) stays light.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.benchmarks import REGISTRY
from evalkit.core import settings
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig


def _cache_dir(value: str | None) -> str:
    return RunConfig(cache_dir=value).cache_path(os.environ)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from evalkit.report.plot_process import PlotProcess

    models = args.model or []
    if args.suite is not None or len(args.bench) > 1 or len(models) > 1:  # a matrix (docs/matrix.md)
        from evalkit.cli.matrix import cmd_matrix

        return cmd_matrix(args, console)
    if not args.bench:
        raise EvalkitError("run: the following arguments are required: BENCH")
    if not models:
        raise EvalkitError("run: the following arguments are required: --model")
    with PlotProcess(start=False) as plotter:  # started by the run once it has something to ask
        return _run_and_print(args, console, None if args.dry_run else plotter)


def _run_and_print(args: argparse.Namespace, console: Console, plotter: Any) -> int:
    from evalkit.benchmarks import benchmark_class
    from evalkit.engine.evaluate import run
    from evalkit.report.console import print_dry_run, print_summary

    bench, model = args.bench[0], args.model[0]
    opts = {**settings.given(args, RunConfig), **settings.given(args, benchmark_class(bench).Options)}
    opts.pop("model", None)
    result = run(bench, model, plotter=plotter, **opts)
    if "dry_run" in result.summary:
        print_dry_run(result.summary, console)
        return 0
    print_summary(result.summary, console, str(result.out_dir))
    for message in result.messages:
        console.print(f"[yellow]{message}[/yellow]")
    return result.exit_code


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    import asyncio

    from evalkit.engine.rereport import rereport
    from evalkit.report.console import print_summary

    summary = asyncio.run(rereport(Path(args.run_dir), judge=args.judge, judge_base_url=args.judge_base_url,
                                   cache_dir=_cache_dir(args.cache_dir)))
    print_summary(summary, console, args.run_dir)
    return 0 if summary.get("complete") or summary.get("stopped") == "sample" else 1  # a sample is done as asked


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    if args.n_boot < 0:
        raise EvalkitError(f"--n-boot must be >= 0, not {args.n_boot}")
    from evalkit.report.plot_process import PlotProcess

    with PlotProcess() as plotter:  # imports matplotlib on the other core while the runs are read and compared
        from evalkit.multi.compare import compare  # (numpy and the analysis: imported after the child starts)
        from evalkit.report.console import print_comparison

        comparison = compare(args.run_dirs, sizes=args.sizes, n_boot=args.n_boot, seed=args.seed)
        out = Path(args.out) if args.out else Path("runs") / f"compare-{comparison.benchmark}"
        report = comparison.write(out, plotter=plotter)
    print_comparison(comparison, console, str(report))
    return 0


def cmd_merge(args: argparse.Namespace, console: Console) -> int:
    from evalkit.multi.merge import merge
    from evalkit.report.console import print_summary

    err = Console(stderr=True)
    result = merge(args.run_dirs, args.out, partial=args.partial, plots=args.plots,
                   say=lambda m: err.print(f"evalkit: {m}", markup=False, highlight=False, soft_wrap=True))
    print_summary(result.summary, console, str(result.out_dir))
    return result.exit_code


def cmd_batches(args: argparse.Namespace, console: Console) -> int:
    import asyncio

    from evalkit.engine.endpoints.batching import run_dir_batches

    if args.run_dir is None:
        found = sorted(p.parent for p in Path("runs").glob("*/batches.jsonl"))
        if not found:
            console.print("runs/: no run directory with batches", markup=False, highlight=False)
        for path in found:
            _print_batches(path, *asyncio.run(run_dir_batches(path, os.environ, cancel=args.cancel)), console)
        return 0
    path = Path(args.run_dir)
    _print_batches(path, *asyncio.run(run_dir_batches(path, os.environ, cancel=args.cancel)), console)
    return 0


def _print_batches(run_dir: Path, rows: list[dict], note: str | None, console: Console) -> None:
    from rich.table import Table

    if not rows:
        console.print(f"{run_dir}: no batches", markup=False, highlight=False, soft_wrap=True)
        return
    table = Table(title=f"batches · {run_dir}", header_style="bold")
    for name in ("batch", "provider", "state", "provider's state", "requests", "done", "failed"):
        table.add_column(name, justify="right" if name in ("requests", "done", "failed") else "left")
    for r in rows:
        table.add_row(r["batch_id"] or f"({r['tag']})", r["provider"], r["state"], r["provider_state"] or "—",
                      f"{r['requests']:,}", f"{r['done']:,}", f"{r['failed']:,}")
    console.print(table)
    if note:
        console.print(note, markup=False, highlight=False)


def cmd_list(args: argparse.Namespace | None, console: Console) -> int:
    from evalkit.providers.registry import RECORDS

    console.print("[bold]benchmarks[/bold]")
    for name, entry in REGISTRY.items():
        console.print(f"  {name:<14} {entry.description}", markup=False, highlight=False)
    console.print("[bold]providers[/bold] (--model PROVIDER/MODEL)")
    for name, record in RECORDS.items():
        console.print(f"  {name:<18} {record.description}", markup=False, highlight=False)
    return 0


def cmd_cache(args: argparse.Namespace, console: Console) -> int:
    from evalkit.ask.store.cache import ResponseCache
    from evalkit.ask.store.seal import CacheSeal

    seal = CacheSeal.from_env(os.environ, args.cache_signed_only)
    url = args.cache_url or os.environ.get("EVALKIT_CACHE_URL")
    if url:
        from evalkit.ask.shared.cache import shared_cache_command

        return shared_cache_command(args.action, url, repair=args.repair, yes=args.yes, seal=seal,
                                    say=lambda line: console.print(line, markup=False, highlight=False,
                                                                   soft_wrap=True))
    directory = Path(_cache_dir(args.cache_dir))
    if args.action == "verify":
        from evalkit.ask.store.verify import verify_cache

        check = verify_cache(directory, repair=args.repair, seal=seal)
        console.print(check.summary(), markup=False, highlight=False, soft_wrap=True)
        if check.ok or args.repair:
            return 0
        console.print("evalkit: re-run with --repair to remove what cannot be read or does not match its key",
                      markup=False)
        return 1
    if not (directory / "cache.db").is_file():  # looking must not create one
        console.print(f"{directory}: no cache here", markup=False, highlight=False)
        return 0
    cache = ResponseCache(directory)
    try:
        if args.action == "clear":
            console.print(f"removed {cache.clear()} cached responses from {directory}")
        else:
            st = cache.stats()
            console.print(f"{directory}: {st.entries} responses, {st.size_bytes / 1024:,.0f} KiB")
    finally:
        cache.close()
    return 0


def sim_config(args: argparse.Namespace, say: Any = None) -> Any:
    """The simulator's SimConfig from `evalkit sim` flags (with --bench: its answer key, after the keys of
    --replay and --answer-key, which win; an answers file by question id is keyed over the benchmark's
    queries). Bad flags or files are EvalkitError."""
    from evalkit.sim.args import config_from_args

    try:
        config = config_from_args(args)
        if args.bench:
            from dataclasses import replace

            from evalkit.benchmarks import benchmark_class
            from evalkit.sim.from_bench import sim_answer_key

            options = {"data": args.data, "images": args.images, "limit": args.limit, "max_side": args.max_side,
                       **settings.given(args, benchmark_class(args.bench).Options)}
            config = replace(config, answer_key=sim_answer_key(args.bench, options, config.answer_key, args.replay,
                                                               say))
    except ValueError as e:
        raise EvalkitError(str(e)) from None
    return config


def cmd_sim(args: argparse.Namespace, console: Console | None = None) -> int:
    from evalkit.sim.server import serve_forever

    err = Console(stderr=True)
    serve_forever(sim_config(args, lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True)),
                  args.host, args.port)
    return 0


def cmd_data(args: argparse.Namespace, console: Console) -> int:
    """`evalkit data` (data/command.py), told each benchmark's bundled sample: the CLI knows the benchmarks,
    the data layer does not."""
    from evalkit.benchmarks import get_benchmark
    from evalkit.data.command import main

    return main(args, sample_of=lambda bench: get_benchmark(bench).default_data)


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    """The demo's files stay where it says (default runs/demo: report.md and plots to read after);
    run again, it resumes there and sends nothing."""
    from evalkit.report.plot_process import PlotProcess

    with PlotProcess() as plotter:  # first: it imports matplotlib while this process loads the rest
        from evalkit.cli.demo import run_demo
        from evalkit.report.console import print_summary

        result = run_demo(Path(args.out), console, plotter=plotter)
    print_summary(result.summary, console, str(result.out_dir))
    console.print(f"report: {result.out_dir / 'report.md'}", markup=False, highlight=False, soft_wrap=True)
    return result.exit_code
