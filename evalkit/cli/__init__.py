"""The `evalkit` command. A thin layer over the Python API: parse flags, call, print, exit.

Exit codes (docs/architecture.md): 0 done; 1 stopped incomplete but resumable; 2 bad input or usage.
Bad input is one line on stderr, `evalkit: error: ...`, never a traceback.

The commands are one table (table.py: name → the function adding its flags, the function running it,
each imported when needed); parser.py builds the flags from it, commands.py does the work of the
commands that have no module of their own; this module runs the command named and turns the outcome
(or the error) into the exit code. `python -m evalkit.cli` runs it (__main__.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from rich.console import Console

from evalkit.cli.parser import DEMO_OUT, build_parser
from evalkit.cli.table import COMMANDS
from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import load_target

__all__ = ["COMMANDS", "DEMO_OUT", "build_parser", "cmd_batches", "cmd_cache", "cmd_compare", "cmd_demo",
           "cmd_list", "cmd_merge", "cmd_report", "cmd_run", "cmd_sim", "entry", "main", "sim_config"]

_FROM_COMMANDS = ("cmd_batches", "cmd_cache", "cmd_compare", "cmd_demo", "cmd_list", "cmd_merge", "cmd_report",
                  "cmd_run", "cmd_sim", "sim_config")


def __getattr__(name: str) -> Any:
    """commands.py's names, as this module has always offered them, imported when first asked for."""
    if name in _FROM_COMMANDS:
        from evalkit.cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does, for the whole command: the run's asking has
    its own handlers (engine/stopping/shutdown.py), but before and after it (loading, the report, the plots)
    SIGTERM's default action ended the process at once with status -15 and no word."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    _one_blas_thread()
    with _sigterm_as_ctrl_c():
        return _main(argv)


def _one_blas_thread() -> None:
    """OpenBLAS with one thread, unless the user chose otherwise, set before numpy is first imported.

    evalkit's linear algebra is tiny (the reliability fit's 3-parameter L-BFGS-B, hundreds of times
    per bootstrap), where a pool of BLAS threads only spins: on a 2-core machine one fit took 3 ms
    with one thread and 76 ms with two beside other work, a TDBench report 13 s instead of 1 s."""
    for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def _main(argv: Sequence[str] | None) -> int:
    console = Console()
    err = Console(stderr=True)
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        return load_target(COMMANDS[args.command].run)(args, console)
    except EvalkitError as e:
        err.print(f"evalkit: error: {e}", markup=False, highlight=False, soft_wrap=True)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("evalkit: interrupted; re-run the same command to resume", markup=False)
        return 130
    except Exception as e:  # a full disk or read-only folder is an error with its remedy, not a traceback
        from evalkit.core.files import environment_error

        message = environment_error(e)
        if message is None:
            raise
        err.print(f"evalkit: error: {message}", markup=False, highlight=False, soft_wrap=True)
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
