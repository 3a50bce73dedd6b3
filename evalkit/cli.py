"""The `evalkit` command. A thin layer over the Python API: parse flags, call, print, exit.

Exit codes (docs/architecture.md): 0 done; 1 stopped incomplete but resumable; 2 bad input or usage.
Bad input is one line on stderr, `evalkit: error: ...`, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.benchmarks import REGISTRY
from evalkit.core import settings
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig

DEMO_OUT = Path("runs") / "demo"  # `evalkit demo` keeps its files here unless --out says otherwise


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.split()[-1]
        if message.startswith("unrecognized arguments") and (bench := getattr(self, "bench", None)):
            message = _foreign_flags(message, bench)
        raise EvalkitError(message if command == "evalkit" else f"{command}: {message}")


class _Version(argparse.Action):
    """`--version`: the version, and the git commit when run from a checkout (git runs only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="print the version (and the git commit of a checkout) and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from evalkit.core.version import describe

        print(describe())
        parser.exit()


def _foreign_flags(message: str, bench: str) -> str:
    """'unrecognized arguments: --circular' given to `run if-bench`: name the benchmark it belongs to."""
    from evalkit.benchmarks import option_owners

    owners = {"--" + k.replace("_", "-"): v for k, v in option_owners().items()}
    for word in message.split(":", 1)[-1].split():
        flag = word.split("=", 1)[0]
        if owners.get(flag, bench) != bench:
            return f"{flag} is an option of benchmark {owners[flag]}, not of {bench}"
    return message


def _bench_in(argv: Sequence[str], after: str) -> str | None:
    """The benchmark named in argv (the positional after `run`, or the value of `--bench`), so only
    that benchmark's module is imported to add its flags."""
    args = list(argv)
    if after == "run":
        if "run" not in args:
            return None
        rest = args[args.index("run") + 1:]
        names = [a for a in rest if a in REGISTRY]
        return names[0] if names else None
    for i, a in enumerate(args):
        if a == after and i + 1 < len(args):
            return args[i + 1] if args[i + 1] in REGISTRY else None
        if a.startswith(after + "="):
            value = a.split("=", 1)[1]
            return value if value in REGISTRY else None
    return None


def _add_bench_options(p: argparse.ArgumentParser, bench: str | None, title: str) -> None:
    if bench is None:
        p.epilog = "benchmark options: see `evalkit run BENCH --help`"
        return
    from evalkit.benchmarks import benchmark_class

    options = benchmark_class(bench).Options
    if dataclasses.fields(options):
        settings.add_arguments(p.add_argument_group(title.format(bench=bench)), options)
    p.bench = bench  # type: ignore[attr-defined]


def _add_run_arguments(p: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    p.add_argument("bench", help="benchmark: " + ", ".join(REGISTRY))
    p.add_argument("--model", required=True, help=RunConfig.__dataclass_fields__["model"].metadata["help"])
    settings.add_arguments(p, RunConfig, skip=("model",))
    _add_bench_options(p, _bench_in(argv, "run"), "{bench} options")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = _Parser(prog="evalkit", description="Evaluate vision-language models on official benchmarks.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run_arguments(sub.add_parser("run", help="evaluate a model on a benchmark"), argv)
    parser.bench = _bench_in(argv, "run")  # type: ignore[attr-defined]  # unknown flags are reported here
    rp = sub.add_parser("report", help="re-score a run directory (optionally resolving answers with a judge)")
    rp.add_argument("run_dir")
    rp.add_argument("--judge")
    rp.add_argument("--judge-base-url")
    rp.add_argument("--cache-dir", default=None)
    kp = sub.add_parser("compare", help="rank finished runs of one benchmark, with intervals, tests and plots")
    kp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    kp.add_argument("--out", help="folder for report.md, comparison.json and plots/ (default: runs/compare-<bench>)")
    kp.add_argument("--sizes", help="JSON or CSV of model -> family, size (billions) for the size correlation")
    kp.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    kp.add_argument("--seed", type=int, default=0)
    sub.add_parser("list", help="benchmarks and providers")
    cp = sub.add_parser("cache", help="response cache: stats, clear, or verify every entry")
    cp.add_argument("action", choices=("stats", "clear", "verify"))
    cp.add_argument("--cache-dir", default=None)
    cp.add_argument("--repair", action="store_true", help="verify: remove unreadable entries and stray files, "
                    "move a damaged database aside keeping what it still holds")
    bp = sub.add_parser("batches", help="a run directory's provider batches (--batch) and their states")
    bp.add_argument("run_dir", nargs="?", help="a run directory (default: every one under ./runs with batches)")
    bp.add_argument("--cancel", action="store_true", help="cancel the batches still running (their lines are "
                    "submitted again by the next run)")
    sp = sub.add_parser("sim", help="run the simulated OpenAI/vLLM-compatible server")
    if _command(argv) == "sim":  # its many flags (and their modules) only when it is the command
        _add_sim_parser(sp, argv)
    from evalkit.benchmarks.genvip_command import add_translate_parser
    from evalkit.benchmarks.tdbench_derive import add_derive_parser

    add_derive_parser(sub)
    from evalkit.lint.command import add_lint_parser
    from evalkit.view.command import add_view_parser

    add_lint_parser(sub)
    add_view_parser(sub)
    add_translate_parser(sub)
    dp = sub.add_parser("demo", help="offline end-to-end demo against the simulated server")
    dp.add_argument("--out", default=str(DEMO_OUT), help=f"where the demo writes its run and cache (default {DEMO_OUT})")
    return parser


def _command(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _add_sim_parser(sp: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    from evalkit.sim.args import add_sim_arguments

    sp.add_argument("--host", default="127.0.0.1")
    sp.add_argument("--port", type=int, default=8000)
    sp.add_argument("--bench", choices=tuple(REGISTRY), help="build the answer key from this benchmark's queries "
                                                            "(with --data)")
    sp.add_argument("--data")
    sp.add_argument("--images")
    sp.add_argument("--limit", type=int)
    sp.add_argument("--max-side", type=int, help="as given to `evalkit run` (keys match either way)")
    add_sim_arguments(sp)
    _add_bench_options(sp, _bench_in(argv, "--bench"),
                       "{bench} options (as for `evalkit run`, to key the same variants)")


def _cache_dir(value: str | None) -> str:
    return RunConfig(cache_dir=value).cache_path(os.environ)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from evalkit.report.plot_process import PlotProcess

    with PlotProcess(start=False) as plotter:  # started by the run once it has something to ask
        return _run_and_print(args, console, None if args.dry_run else plotter)


def _run_and_print(args: argparse.Namespace, console: Console, plotter: Any) -> int:
    from evalkit.benchmarks import benchmark_class
    from evalkit.engine.evaluate import run
    from evalkit.report.console import print_dry_run, print_summary

    opts = {**settings.given(args, RunConfig), **settings.given(args, benchmark_class(args.bench).Options)}
    opts.pop("model", None)
    result = run(args.bench, args.model, plotter=plotter, **opts)
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
    return 0 if summary.get("complete") else 1


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from evalkit.engine.compare import compare
    from evalkit.report.console import print_comparison

    if args.n_boot < 0:
        raise EvalkitError(f"--n-boot must be >= 0, not {args.n_boot}")
    comparison = compare(args.run_dirs, sizes=args.sizes, n_boot=args.n_boot, seed=args.seed)
    out = Path(args.out) if args.out else Path("runs") / f"compare-{comparison.benchmark}"
    report = comparison.write(out)
    print_comparison(comparison, console, str(report))
    return 0


def cmd_batches(args: argparse.Namespace, console: Console) -> int:
    import asyncio

    from evalkit.engine.batching import run_dir_batches

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


def cmd_list(console: Console) -> int:
    from evalkit.providers import PROVIDERS

    console.print("[bold]benchmarks[/bold]")
    for name, entry in REGISTRY.items():
        console.print(f"  {name:<14} {entry.description}")
    console.print("[bold]providers[/bold] (--model PROVIDER/MODEL)")
    for name, desc in PROVIDERS.items():
        console.print(f"  {name:<18} {desc}")
    return 0


def cmd_cache(args: argparse.Namespace, console: Console) -> int:
    from evalkit.ask.cache import ResponseCache

    directory = Path(_cache_dir(args.cache_dir))
    if args.action == "verify":
        from evalkit.ask.cache_verify import verify_cache

        check = verify_cache(directory, repair=args.repair)
        console.print(check.summary(), markup=False, highlight=False, soft_wrap=True)
        if check.ok or args.repair:
            return 0
        console.print("evalkit: re-run with --repair to remove what cannot be read", markup=False)
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


def sim_config(args: argparse.Namespace) -> Any:
    """The simulator's SimConfig from `evalkit sim` flags (with --bench: its answer key)."""
    from evalkit.sim.args import config_from_args

    config = config_from_args(args)
    if args.bench:
        from dataclasses import replace

        from evalkit.benchmarks import benchmark_class
        from evalkit.sim.from_bench import answer_key_for

        options = {"data": args.data, "images": args.images, "limit": args.limit, "max_side": args.max_side,
                   **settings.given(args, benchmark_class(args.bench).Options)}
        config = replace(config, answer_key=answer_key_for(args.bench, options))
    return config


def cmd_sim(args: argparse.Namespace) -> int:
    from evalkit.sim.server import serve_forever

    serve_forever(sim_config(args), args.host, args.port)
    return 0


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    """The demo's files stay where it says (default runs/demo: report.md and plots to read after);
    run again, it resumes there and sends nothing."""
    from evalkit.report.plot_process import PlotProcess

    with PlotProcess() as plotter:  # first: it imports matplotlib while this process loads the rest
        from evalkit.demo import run_demo
        from evalkit.report.console import print_summary

        result = run_demo(Path(args.out), console, plotter=plotter)
    print_summary(result.summary, console, str(result.out_dir))
    console.print(f"report: {result.out_dir / 'report.md'}")
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    console = Console()
    err = Console(stderr=True)
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        if args.command == "run":
            return cmd_run(args, console)
        if args.command == "report":
            return cmd_report(args, console)
        if args.command == "compare":
            return cmd_compare(args, console)
        if args.command == "list":
            return cmd_list(console)
        if args.command == "cache":
            return cmd_cache(args, console)
        if args.command == "batches":
            return cmd_batches(args, console)
        if args.command == "sim":
            return cmd_sim(args)
        if args.command == "translate":
            from evalkit.benchmarks.genvip_command import cmd_translate

            return cmd_translate(args, console)
        if args.command == "derive":
            from evalkit.benchmarks.tdbench_derive import cmd_derive

            return cmd_derive(args, console)
        if args.command == "demo":
            return cmd_demo(args, console)
        if args.command == "lint":
            from evalkit.lint.command import cmd_lint

            return cmd_lint(args, console)
        if args.command == "view":
            from evalkit.view.command import cmd_view

            return cmd_view(args, console)
    except EvalkitError as e:
        err.print(f"evalkit: error: {e}", markup=False, highlight=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("evalkit: interrupted; re-run the same command to resume", markup=False)
        return 130
    except Exception as e:  # a full disk or read-only folder is an error with its remedy, not a traceback
        from evalkit.core.environment import environment_error

        message = environment_error(e)
        if message is None:
            raise
        err.print(f"evalkit: error: {message}", markup=False, highlight=False, soft_wrap=True)
        return 2
    return 2


def entry() -> None:
    """The `evalkit` command: main(), then an exit that skips the interpreter's teardown.

    By then every file is written and closed and every thread joined; unloading numpy, matplotlib
    and the rest module by module cost about 0.25 s of each run (bench/overhead.py). The Python
    API and the tests call main() and keep the ordinary exit, and so does a profiled or traced
    process (cProfile, coverage), whose results are written at exit."""
    code = main()
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
