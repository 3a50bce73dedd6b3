"""A warm parent for the command-line tests' child processes.

Each `evalkit` child of the suite used to start a fresh interpreter and import the CLI, the engine
and a provider SDK before doing any work: ~1.4 s of CPU for a small run, ~3.5 s through the
anthropic SDK (which builds its pydantic types at import), about half the suite's CPU in all. The
zygote imports them once per test worker and forks one child per command. A child is still a real
process of its own (its own pid, environment, working directory, file-size limit, stdout and stderr,
exit status and signals): only the interpreter start and the imports are shared. Start-up itself is
covered where it is the behaviour (tests/test_light_start.py, tests/test_packaging.py).

Protocol, one Unix-socket connection per command: the client sends one JSON line (argv, env, cwd,
out/err file paths, max_file_bytes); the zygote answers {"pid": N} at once and {"status": S} (a
waitpid status) when the child has ended.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

# what a command-line child imports on its way to work (matplotlib stays out: plots draw in a process
# of their own, and the CLI promises not to import it)
PRELOAD = ("evalkit.cli", "evalkit.engine.evaluate", "evalkit.engine.rereport", "evalkit.engine.compare",
           "evalkit.engine.dry_run", "evalkit.lint.command", "evalkit.providers.openai_compat",
           "evalkit.providers.anthropic", "evalkit.providers.google", "evalkit.sim.server", "scipy.stats",
           "openai", "anthropic", "google.genai")


def _serve(path: str) -> None:
    """The zygote's loop: accept a command, fork it, report its end. Runs single-threaded (fork-safe)."""
    import importlib

    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from evalkit.cli import main

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    parent = os.getppid()
    print("ready", flush=True)
    waiting: dict[int, socket.socket] = {}
    while os.getppid() == parent:  # the test worker is gone: so is the zygote
        ready, _, _ = select.select([server], [], [], 0.02)
        if ready:
            conn, _ = server.accept()
            request = json.loads(conn.makefile("rb").readline())
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                for other in waiting.values():
                    other.close()
                _child(main, request)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            waiting[pid] = conn
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                conn.close()


def _child(main, request: dict) -> None:
    """In the forked child: become the command `python -c 'evalkit.cli.main(argv)'` would have been."""
    import random
    import resource
    import traceback

    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, name in ((1, "out"), (2, "err")):
            target = os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if request["max_file_bytes"] is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
            limit = request["max_file_bytes"]
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        random.seed()  # not the zygote's sequence, shared by every child
        sys.argv = ["-c", *request["argv"]]
        try:
            result = main(request["argv"])
            code = result if isinstance(result, int) else 0 if result is None else 1
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            traceback.print_exc()
            code = 128 + signal.SIGINT
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


class Zygote:
    """The client side: one zygote per test worker, started on first use."""

    def __init__(self, checkout: Path) -> None:
        self._dir = tempfile.mkdtemp(prefix="evalkit-zygote-")
        self.path = os.path.join(self._dir, "sock")
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        code = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
                f"sys.path.insert(0, {str(Path(__file__).parent)!r}); import cli_zygote; "
                "cli_zygote._serve(sys.argv[1])")
        self._proc = subprocess.Popen([sys.executable, "-c", code, self.path], stdout=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, env=env, text=True)
        if self._proc.stdout is None or self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the CLI zygote did not start")
        atexit.register(self.close)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def run(self, cmd: list[str], argv: Sequence[str], env: Mapping[str, str], cwd: str | Path | None,
            timeout: float, max_file_bytes: int | None) -> subprocess.CompletedProcess[str]:
        """Like subprocess.run(cmd, capture_output=True, text=True, timeout=...) for `evalkit ARGV`."""
        with tempfile.TemporaryDirectory(prefix="evalkit-cli-") as tmp:
            out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
            request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd or os.getcwd()), "out": out, "err": err,
                       "max_file_bytes": max_file_bytes}
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.path)
                conn.sendall(json.dumps(request).encode() + b"\n")
                replies = conn.makefile("rb")
                pid = json.loads(replies.readline())["pid"]
                conn.settimeout(timeout)
                try:
                    line = replies.readline()
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(cmd, timeout) from None
                if not line:
                    raise RuntimeError(f"the CLI zygote lost child {pid}")
                status = json.loads(line)["status"]
            return subprocess.CompletedProcess(cmd, os.waitstatus_to_exitcode(status), _text(out), _text(err))

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _text(path: str) -> str:
    """A captured stream as subprocess.run(text=True) decodes it (locale encoding, universal newlines)."""
    with open(path, encoding=None, newline=None) as fh:
        return fh.read()


_lock = threading.Lock()
_zygotes: dict[Path, Zygote] = {}


def zygote_for(checkout: Path) -> Zygote:
    """This worker's zygote for `checkout` (started, or restarted if it died)."""
    with _lock:
        z = _zygotes.get(checkout)
        if z is None or not z.alive():
            z = _zygotes[checkout] = Zygote(checkout)
        return z
