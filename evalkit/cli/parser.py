"""The `evalkit` command's flags, built so that asking for help stays cheap.

`build_parser` adds every command of the table (cli/table.py); the `add_*_parser` functions here are
the flags of the commands whose work is in commands.py. Only the benchmark named on the command line
has its module imported (to add its flags), and `evalkit sim`'s many flags only when it is the
command: `--help`, `--version` and `list` must not pay for what they do not show
(tests/test_light_start.py).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.benchmarks import REGISTRY
from evalkit.cli.table import COMMANDS
from evalkit.core import settings
from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import load_target
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


def _foreign_flags(message: str, bench: str | tuple[str, ...]) -> str:
    """'unrecognized arguments: --circular' given to `run if-bench`: name the benchmark it belongs to."""
    from evalkit.benchmarks import option_owners

    benches = (bench,) if isinstance(bench, str) else bench
    owners = {"--" + k.replace("_", "-"): v for k, v in option_owners().items()}
    for word in message.split(":", 1)[-1].split():
        flag = word.split("=", 1)[0]
        if owners.get(flag, benches[0]) not in benches:
            return f"{flag} is an option of benchmark {owners[flag]}, not of {', '.join(benches)}"
    return message


def _bench_in(argv: Sequence[str], after: str) -> str | None:
    """The benchmark named in argv by `after` (e.g. `--bench`), so only that benchmark's module is
    imported to add its flags."""
    args = list(argv)
    for i, a in enumerate(args):
        if a == after and i + 1 < len(args):
            return args[i + 1] if args[i + 1] in REGISTRY else None
        if a.startswith(after + "="):
            value = a.split("=", 1)[1]
            return value if value in REGISTRY else None
    return None


def _benches_in_run(argv: Sequence[str], command: str = "run") -> tuple[str, ...]:
    """The benchmarks `evalkit run` (or `plan`) names (positionals, and a --suite file's), so only their
    modules are imported to add their flags."""
    args = list(argv)
    if command not in args:
        return ()
    rest = args[args.index(command) + 1:]
    names = [a for a in rest if a in REGISTRY]
    suite = next((rest[i + 1] for i, a in enumerate(rest[:-1]) if a == "--suite"), None)
    suite = suite or next((a.split("=", 1)[1] for a in rest if a.startswith("--suite=")), None)
    if suite:  # its TOML reader only now: --help stays light
        from evalkit.multi.suite import suite_benchmarks

        names += suite_benchmarks(suite)
    return tuple(dict.fromkeys(names))


def _add_bench_options(p: argparse.ArgumentParser, bench: str | tuple[str, ...] | None, title: str) -> None:
    """Each named benchmark's own flags, in a group of its own (a flag two benchmarks share: once)."""
    benches = (bench,) if isinstance(bench, str) else bench or ()
    if not benches:
        p.epilog = "benchmark options: see `evalkit run BENCH --help`"
        return
    from evalkit.benchmarks import benchmark_class

    added: set[str] = set()
    for name in benches:
        options = benchmark_class(name).Options
        fresh = [f.name for f in dataclasses.fields(options) if f.name not in added]
        if fresh:
            skip = [f.name for f in dataclasses.fields(options) if f.name in added]
            settings.add_arguments(p.add_argument_group(title.format(bench=name)), options, skip=skip)
        added.update(fresh)
    p.bench = bench  # type: ignore[attr-defined]


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command of the table (cli/table.py) in its order, then what depends on the command line: the flags
    of the benchmarks `run` names (only their modules imported), and `sim`'s many flags when it is the command."""
    parser = _Parser(prog="evalkit", description="Evaluate vision-language models on official benchmarks.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS.values():
        load_target(command.flags)(sub)
    benches = _benches_in_run(argv)
    _add_bench_options(sub.choices["run"], benches, "{bench} options")
    parser.bench = benches  # type: ignore[attr-defined]  # unknown flags are reported here
    if _command(argv) == "plan":  # a plan prices the variants the benchmark's flags ask for, as a run would
        planned = _benches_in_run(argv, "plan")[:1]
        _add_bench_options(sub.choices["plan"], planned, "{bench} options")
        parser.bench = planned  # type: ignore[attr-defined]
    if _command(argv) == "sim":  # its many flags (and their modules) only when it is the command
        _add_sim_flags(sub.choices["sim"], argv)
    return parser


def add_run_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="evaluate a model on a benchmark")
    p.add_argument("bench", nargs="*", metavar="BENCH", help="benchmark(s): " + ", ".join(REGISTRY) + "; several "
                   "with several --model run every (benchmark, model) pair at once (docs/matrix.md)")
    p.add_argument("--model", action="append", help=RunConfig.__dataclass_fields__["model"].metadata["help"]
                   + "; repeat it to compare models in one command")
    p.add_argument("--suite", metavar="FILE", help="TOML file of [[benchmarks]] (name, data, images, options) and "
                   "[[models]] (spec, label, base_url, extra, reasoning_effort, detail, media_resolution, repeats) to "
                   "run as a matrix; flags override its values")
    settings.add_arguments(p, RunConfig, skip=("model",))


def add_report_parser(sub: Any) -> None:
    rp = sub.add_parser("report", help="re-score a run directory (optionally resolving answers with a judge)")
    rp.add_argument("run_dir", help="the run directory to re-score (its records are never asked again)")
    rp.add_argument("--judge", help="LLM extractor for the answers the rules cannot parse, e.g. openai/gpt-4o-mini "
                    "(its verdicts are written into records.jsonl)")
    rp.add_argument("--judge-base-url", help="base URL of an OpenAI-compatible judge server")
    rp.add_argument("--cache-dir", default=None, help="response cache for the judge's answers and the data's file "
                    "hashes (default ./cache or EVALKIT_CACHE_DIR)")


def add_compare_parser(sub: Any) -> None:
    kp = sub.add_parser("compare", help="rank finished runs of one benchmark, with intervals, tests and plots")
    kp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="finished run directories of one benchmark")
    kp.add_argument("--out", help="folder for report.md, comparison.json and plots/ (default: runs/compare-<bench>)")
    kp.add_argument("--sizes", help="JSON or CSV of model -> family, size (billions) for the size correlation")
    kp.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    kp.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples (default 0: the same "
                    "intervals every time)")
    kp.add_argument("--no-plots", dest="plots", action="store_false", help="draw no plots (report.md and "
                    "comparison.json only; with --continue, none for the runs either)")
    kc = kp.add_argument_group("continuing the runs until every pair is decided (docs/stopping.md)")
    kc.add_argument("--continue", dest="continue_runs", action="store_true",
                    help="continue the runs (on the same items) together, in one seeded order, until every pair "
                         "is decided (as a matrix's --until-decided), then compare them; only new items are asked")
    kc.add_argument("--width", type=float, metavar="W", help="with --continue: a pair whose difference's 95 %% "
                    "interval is at most +-W points is decided too")
    kc.add_argument("--sample-seed", type=int, metavar="N", help="with --continue: the order's seed (default: the "
                    "runs' samples' own, else 0)")
    kc.add_argument("--cache-dir", help="with --continue: the response cache (default as for `evalkit run`)")
    kc.add_argument("--no-progress", dest="progress", action="store_false", help="with --continue: no live progress")


def add_merge_parser(sub: Any) -> None:
    mp = sub.add_parser("merge", help="join the run directories of one run's shards (--shard K/N) into one run")
    mp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="the shards' run directories")
    mp.add_argument("--out", required=True, help="the merged run directory (the unsharded command with this "
                    "--out finds it complete)")
    mp.add_argument("--partial", action="store_true", help="merge the shards given even if some are missing "
                    "(the run is marked incomplete; exit 1)")
    mp.add_argument("--no-plots", dest="plots", action="store_false", help="draw no plots (summary.json and "
                    "report.md only)")


def add_list_parser(sub: Any) -> None:
    sub.add_parser("list", help="benchmarks and providers")


def add_cache_parser(sub: Any) -> None:
    cp = sub.add_parser("cache", help="response cache: stats, clear, or verify every entry")
    cp.add_argument("action", choices=("stats", "clear", "verify"), help="stats: entries and size; clear: remove "
                    "every cached response; verify: read every entry and report what cannot be read or would not be "
                    "served (swapped, altered, unsigned)")
    cp.add_argument("--cache-dir", default=None, help="the cache folder (default ./cache or EVALKIT_CACHE_DIR)")
    cp.add_argument("--cache-url", default=None, help="a shared cache in Redis: redis://[:PASSWORD@]HOST:PORT/DB "
                    "(default EVALKIT_CACHE_URL)")
    cp.add_argument("--repair", action="store_true", help="verify: remove unreadable, swapped and altered entries "
                    "and stray files, move a damaged database aside keeping what it still holds")
    cp.add_argument("--cache-signed-only", action="store_true", help="verify: count unsigned entries (written "
                    "before 0.4) as faults, as a run with --cache-signed-only refuses them (or "
                    "EVALKIT_CACHE_SIGNED_ONLY=1)")
    cp.add_argument("--yes", action="store_true", help="clear: really clear a shared cache (it is a team's)")


def add_batches_parser(sub: Any) -> None:
    bp = sub.add_parser("batches", help="a run directory's provider batches (--batch) and their states")
    bp.add_argument("run_dir", nargs="?", help="a run directory (default: every one under ./runs with batches)")
    bp.add_argument("--cancel", action="store_true", help="cancel the batches still running (their lines are "
                    "submitted again by the next run)")


def add_sim_parser(sub: Any) -> None:
    """`evalkit sim` itself; its flags only when it is the command (`build_parser`: `_add_sim_flags`)."""
    sub.add_parser("sim", help="run the simulated OpenAI/vLLM-compatible server")


def add_demo_parser(sub: Any) -> None:
    dp = sub.add_parser("demo", help="offline end-to-end demo against the simulated server")
    dp.add_argument("--out", default=str(DEMO_OUT), help=f"where the demo writes its run and cache (default {DEMO_OUT})")


def _command(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _add_sim_flags(sp: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    from evalkit.sim.args import add_sim_arguments

    sp.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sp.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    sp.add_argument("--bench", choices=tuple(REGISTRY), help="build the answer key from this benchmark's queries "
                                                            "(with --data)")
    sp.add_argument("--data", help="with --bench: the data to key the answers on, as given to `evalkit run`")
    sp.add_argument("--images", help="with --bench: folder the data's image paths are relative to")
    sp.add_argument("--limit", type=int, help="with --bench: only the first N items, as given to `evalkit run`")
    sp.add_argument("--max-side", type=int, help="as given to `evalkit run` (keys match either way)")
    add_sim_arguments(sp)
    _add_bench_options(sp, _bench_in(argv, "--bench"),
                       "{bench} options (as for `evalkit run`, to key the same variants)")
