"""Run the `evalkit` command of the checkout under test: in a child process (run_cli, start_cli), or in
this process (run_main) where the process itself is not what the test is about.

The hardening tests drive the command line against the simulator running in the test process.
By default the child runs this checkout; EVALKIT_UNDER_TEST=/path/to/an/older/checkout runs that
one instead (its `evalkit.cli.main`), which is how each test is shown to fail on evalkit 0.1.0:

    git worktree add /tmp/v010 881f989
    EVALKIT_UNDER_TEST=/tmp/v010 python -m pytest tests/providers/test_hostile_replies.py
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from cli_zygote import zygote_for

REPO = Path(__file__).resolve().parents[1]
# `python -c` puts the working directory first on sys.path: drop it, or a child started in a checkout
# would import that checkout's evalkit instead of the one under test
_PATH = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
_CALL = "from evalkit.cli import main; sys.exit(main(sys.argv[1:]))"
_MAIN = _PATH + _CALL


def checkout_under_test() -> Path:
    return Path(os.environ.get("EVALKIT_UNDER_TEST") or REPO)


def _argv(args: Sequence[str], plots: bool) -> list[str]:
    """`run` gets --no-plots unless the test wants plots (or the checkout under test has no such flag):
    these tests look at records, counts and messages, and a plot process per run costs a core-second."""
    argv = list(map(str, args))
    settings = checkout_under_test() / "evalkit" / "core" / "settings.py"
    if (argv[:1] == ["run"] and not plots and "--no-plots" not in argv and settings.is_file()
            and '"--no-plots"' in settings.read_text(encoding="utf-8")):
        argv.append("--no-plots")
    return argv


def run_cli(args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 120.0,
            cwd: str | Path | None = None, max_file_bytes: int | None = None,
            plots: bool = False, without: Sequence[str] = (), prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`evalkit ARGS` in a child process; stdout and stderr captured as text. `env` adds to os.environ
    (matplotlib, if a plot is drawn, without a display), less the variables whose names start with one
    of `without` (a user's shell without the developer's keys). `max_file_bytes`: no file the child
    writes may grow past it (RLIMIT_FSIZE): a disk that fills up, on any machine and without root.
    `prelude`: Python code the child runs before the command (a fault injected from outside evalkit,
    e.g. tests/ask/test_batch_kill.py's death between creating a batch and recording it)."""

    def limit_files() -> None:
        if max_file_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    child_env = _child_env(env, without)
    cmd = [sys.executable, "-c", f"{_PATH}{prelude}\n{_CALL}" if prelude else _MAIN, *_argv(args, plots)]
    if _warm_start(env):
        return zygote_for(checkout_under_test()).run(cmd, cmd[3:], child_env, cwd, timeout, max_file_bytes,
                                                     prelude)
    return subprocess.run(cmd, capture_output=True, text=True, env=child_env, timeout=timeout, cwd=cwd,
                          preexec_fn=limit_files)


def _child_env(env: Mapping[str, str] | None, without: Sequence[str]) -> dict[str, str]:
    """os.environ less the variables whose names start with one of `without`, then this checkout on the
    path, plots without a display, and `env`."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(tuple(without))}
    return {**kept, "PYTHONPATH": str(checkout_under_test()), "MPLBACKEND": "Agg", **(env or {})}


def _warm_start(env: Mapping[str, str] | None) -> bool:
    """Fork the child from a warm zygote (tests/cli_zygote.py), unless the test changes how the interpreter
    starts (PYTHON* variables: a sitecustomize, another path), runs an older checkout, or opts out
    (EVALKIT_TESTS_COLD=1 starts every child afresh, as before)."""
    return (not os.environ.get("EVALKIT_UNDER_TEST") and os.environ.get("EVALKIT_TESTS_COLD") != "1"
            and not any(k.startswith("PYTHON") for k in (env or {})))


def start_cli(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
              plots: bool = False, without: Sequence[str] = ()) -> subprocess.Popen[str]:
    """`evalkit ARGS` started in a child process (to be signalled); stdout and stderr piped as text."""
    child_env = _child_env(env, without)
    cmd = [sys.executable, "-c", _MAIN, *_argv(args, plots)]
    if _warm_start(env):
        return zygote_for(checkout_under_test()).start(cmd, cmd[3:], child_env, cwd)  # type: ignore[return-value]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env, cwd=cwd)


def run_counting_reads(args: Sequence[str], cwd: str | Path, env: Mapping[str, str] | None = None, *,
                       stdout: bool = False) -> tuple[int, str, int]:
    """`evalkit ARGS` in a child process of its own (never the zygote's), without this process's EVALKIT_*
    variables: (exit code, its stderr, or its stdout with `stdout`, the bytes it read: /proc/PID/io's rchar,
    read after it exited and before it is reaped). For the tests that count what a command reads."""
    pipe, null = subprocess.PIPE, subprocess.DEVNULL
    child = subprocess.Popen([sys.executable, "-c", _MAIN, *map(str, args)], cwd=cwd,
                             env=_child_env(env, ("EVALKIT_",)), stdout=pipe if stdout else null,
                             stderr=null if stdout else pipe, text=True)
    stream = child.stdout if stdout else child.stderr
    assert stream is not None
    text = stream.read()  # drained as it runs (a full pipe would stall it); ends when the child exits
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: its /proc entry stays
    with open(f"/proc/{child.pid}/io", encoding="ascii") as fh:
        rchar = int(dict(line.split(": ") for line in fh.read().splitlines())["rchar"])
    child.wait()
    return child.returncode, text, rchar


def run_main(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
             plots: bool = False) -> subprocess.CompletedProcess[str]:
    """`evalkit ARGS` as run_cli runs it, but in this process: `evalkit.cli.main(ARGS)` with the environment
    (os.environ plus `env`) and the working directory the child would have had, stdout and stderr captured
    as text, stdin empty, and the same CompletedProcess back. An exception main() lets out is what the
    child would have printed: its traceback on stderr, exit 1. For the tests whose subject is what the
    command does, not the process (signals, kills, file-size limits, races between processes and timeouts
    stay with run_cli and start_cli): a child costs about 0.1 s of CPU more than the call itself.

    Everything is put back afterwards (os.environ, the working directory, the streams). A test that sets
    PYTHON* variables, runs an older checkout (EVALKIT_UNDER_TEST) or asks for cold children
    (EVALKIT_TESTS_COLD=1) gets run_cli: a child, as before."""
    if not _warm_start(env):
        return run_cli(args, env=env, cwd=cwd, plots=plots)
    from evalkit.cli import main

    argv = _argv(args, plots)
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.update({"MPLBACKEND": "Agg", **(env or {})})
    try:
        if cwd is not None:
            os.chdir(cwd)
        with open(os.devnull, encoding="utf-8") as nothing, contextlib.ExitStack() as streams:
            streams.enter_context(contextlib.redirect_stdout(out))
            streams.enter_context(contextlib.redirect_stderr(err))
            saved_stdin, sys.stdin = sys.stdin, nothing
            try:
                code = _exit_code(main, argv)
            finally:
                sys.stdin = saved_stdin
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["evalkit", *argv], code, out.getvalue(), err.getvalue())


def _exit_code(main, argv: list[str]) -> int:  # noqa: ANN001
    """main(argv)'s exit status as `sys.exit(main(argv))` in a child would give it."""
    try:
        result = main(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        raise  # main() turns the run's own interrupts into exit 130: this one is the test runner's
    except Exception:
        traceback.print_exc()
        return 1
    return result if isinstance(result, int) else 0 if result is None else 1
