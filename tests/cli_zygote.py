"""A warm parent for the command-line tests' child processes.

Each `evalkit` child of the suite used to start a fresh interpreter and import the CLI, the engine
and a provider SDK before doing any work: ~1.4 s of CPU for a small run, ~3.5 s through the
anthropic SDK (which builds its pydantic types at import), about half the suite's CPU in all. The
zygote imports them once per test run (its workers share it) and forks one child per command. A child is still a real
process of its own (its own pid, environment, working directory, file-size limit, stdout and stderr,
exit status and signals): only the interpreter start and the imports are shared. Start-up itself is
covered where it is the behaviour (tests/cli/test_light_start.py, tests/cli/test_packaging.py).

Protocol, one Unix-socket connection per command: the client sends one JSON line (argv, env, cwd,
out/err file paths, max_file_bytes, a prelude); the zygote answers {"pid": N} at once and {"status": S} (a
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
from typing import Any

# what a command-line child imports on its way to work besides evalkit's own modules (matplotlib stays
# out: plots draw in a process of their own, and evalkit imports it nowhere else)
PRELOAD = ("scipy.stats", "diskcache", "PIL.PngImagePlugin", "PIL.JpegImagePlugin", "rich.table", "openai",
           "anthropic", "google.genai")


def _preload() -> None:
    import importlib
    import pkgutil

    import evalkit

    names = [m.name for m in pkgutil.walk_packages(evalkit.__path__, "evalkit.")]
    for name in [*names, *PRELOAD]:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _serve(path: str, watched: int) -> None:
    """The zygote's loop: accept a command, fork it, report its end, until the process `watched` (the test
    worker, or the test run's controller for a zygote its workers share) is gone. Runs single-threaded
    (fork-safe)."""
    _preload()
    from evalkit.cli import main

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    waiting: dict[int, socket.socket] = {}
    while _running(watched):
        ready, _, _ = select.select([server], [], [], 0.02)
        if ready:
            conn, _ = server.accept()
            _, fds, _, _ = socket.recv_fds(conn, 1, 2)  # the child's stdout and stderr, then the request
            request = json.loads(conn.makefile("rb").readline())
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                for other in waiting.values():
                    other.close()
                _child(main, request, fds)
            for fd in fds:
                os.close(fd)
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
    folder = os.path.dirname(path)  # what the test run left of it: its socket (and a shared one's lock)
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.unlink(f"{folder}.lock")


def _child(main, request: dict, fds: list[int]) -> None:
    """In the forked child: become the command `python -c 'evalkit.cli.main(argv)'` would have been."""
    import random
    import resource
    import traceback

    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, target in zip((1, 2), fds, strict=True):
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
        if request.get("prelude"):  # run_cli's prelude: code run before the command, as the cold child runs it
            exec(compile(request["prelude"], "<prelude>", "exec"), {"__name__": "__prelude__"})
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
    """The client side: a zygote started on first use, by this test worker for itself (`folder` None: it
    ends with the worker), or for every worker of the test run (in `folder`: it ends with the run's
    controller, `watched`), or one such zygote another worker started (`pid`: no process of ours)."""

    def __init__(self, checkout: Path, folder: str | None = None, watched: int | None = None,
                 pid: int | None = None) -> None:
        self._owned = folder is None
        self._dir = folder or tempfile.mkdtemp(prefix="evalkit-zygote-")
        self.path = os.path.join(self._dir, "sock")
        self._proc: subprocess.Popen[str] | None = None
        self.pid = pid
        if pid is not None:
            return
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        code = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
                f"sys.path.insert(0, {str(Path(__file__).parent)!r}); import cli_zygote; "
                "cli_zygote._serve(sys.argv[1], int(sys.argv[2]))")
        # a shared zygote outlives the worker that started it: it holds none of that worker's pipes (a
        # controller reading a worker's stderr to its end would wait for it), its own errors go to a file
        err = None if self._owned else open(os.path.join(self._dir, "zygote.err"), "w")  # noqa: SIM115
        try:
            self._proc = subprocess.Popen([sys.executable, "-c", code, self.path, str(watched or os.getpid())],
                                          stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=err, env=env,
                                          text=True)
        finally:
            if err is not None:
                err.close()
        self.pid = self._proc.pid
        if self._proc.stdout is None or self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the CLI zygote did not start")
        if self._owned:
            atexit.register(self.close)

    def alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _running(self.pid)

    def _launch(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | Path | None,
                max_file_bytes: int | None, out: int, err: int, prelude: str = "") -> tuple[socket.socket, Any, int]:
        """Fork `evalkit ARGV` writing to the file descriptors out and err: (connection, its reader, pid)."""
        request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd or os.getcwd()),
                   "max_file_bytes": max_file_bytes, "prelude": prelude}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        socket.send_fds(conn, [b"."], [out, err])
        conn.sendall(json.dumps(request).encode() + b"\n")
        replies = conn.makefile("rb")
        return conn, replies, json.loads(replies.readline())["pid"]

    def run(self, cmd: list[str], argv: Sequence[str], env: Mapping[str, str], cwd: str | Path | None,
            timeout: float, max_file_bytes: int | None, prelude: str = "") -> subprocess.CompletedProcess[str]:
        """Like subprocess.run(cmd, capture_output=True, text=True, timeout=...) for `evalkit ARGV`."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            conn, replies, pid = self._launch(argv, env, cwd, max_file_bytes, out.fileno(), err.fileno(), prelude)
            with conn, replies:
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

    def start(self, cmd: list[str], argv: Sequence[str], env: Mapping[str, str],
              cwd: str | Path | None) -> WarmProcess:
        """Like subprocess.Popen(cmd, stdout=PIPE, stderr=PIPE, text=True) for `evalkit ARGV`."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            conn, replies, pid = self._launch(argv, env, cwd, None, out_w, err_w)
        finally:
            os.close(out_w)
            os.close(err_w)
        return WarmProcess(cmd, pid, conn, replies, open(out_r), open(err_r))

    def close(self) -> None:
        """End a zygote of this worker's own (a shared one ends with the test run's controller)."""
        if self._proc is None or not self._owned:
            return
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _text(file: Any) -> str:
    """A captured stream as subprocess.run(text=True) decodes it (locale encoding, universal newlines)."""
    file.seek(0)
    with open(os.dup(file.fileno()), encoding=None, newline=None) as fh:
        return fh.read()


class WarmProcess:
    """The part of subprocess.Popen the tests use, for a child forked by the zygote: pid, stdout and
    stderr (text pipes), poll, wait, communicate, send_signal, kill, terminate, returncode."""

    def __init__(self, args: list[str], pid: int, conn: socket.socket, replies: Any, stdout: Any, stderr: Any):
        self.args, self.pid, self.stdout, self.stderr = args, pid, stdout, stderr
        self.returncode: int | None = None
        self._conn, self._replies = conn, replies

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._ended()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._ended()
        assert self.returncode is not None
        return self.returncode

    def _ended(self) -> None:
        line = self._replies.readline()
        if not line:
            raise RuntimeError(f"the CLI zygote lost child {self.pid}")
        self.returncode = os.waitstatus_to_exitcode(json.loads(line)["status"])
        self._replies.close()
        self._conn.close()

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Both pipes read to their end (in threads, as Popen does), then the exit status."""
        texts: dict[str, str] = {}

        def read(name: str, pipe: Any) -> None:
            texts[name] = pipe.read() if pipe is not None and not pipe.closed else ""

        readers = [threading.Thread(target=read, args=(n, p), daemon=True)
                   for n, p in (("out", self.stdout), ("err", self.stderr))]
        for t in readers:
            t.start()
        for t in readers:
            t.join(timeout)
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(timeout)
        for pipe in (self.stdout, self.stderr):
            pipe.close()
        return texts["out"], texts["err"]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


_lock = threading.Lock()
_zygotes: dict[Path, Zygote] = {}


def zygote_for(checkout: Path) -> Zygote:
    """This worker's zygote for `checkout` (started, or restarted if it died): under pytest-xdist, one for
    every worker of the test run. Each zygote imports all of evalkit and the SDKs (6-7 s of CPU): three
    workers sharing one pay that once, not three times."""
    with _lock:
        z = _zygotes.get(checkout)
        if z is None or not z.alive():
            run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one test run
            z = _zygotes[checkout] = _shared(checkout, run) if run else Zygote(checkout)
        return z


def _shared(checkout: Path, run: str) -> Zygote:
    """The test run's zygote for `checkout`: the running one, or one started now (by whichever worker asks
    first, under a file lock) that ends when the run's controller (this worker's parent) does."""
    import fcntl
    import hashlib

    key = hashlib.sha256(f"{run}\0{checkout}".encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"evalkit-zygote-{key}")
    with open(f"{folder}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(OSError, ValueError):
            pid = int(Path(folder, "pid").read_text())
            if _running(pid):
                return Zygote(checkout, folder, pid=pid)
        shutil.rmtree(folder, ignore_errors=True)
        os.mkdir(folder)
        z = Zygote(checkout, folder, watched=os.getppid())
        Path(folder, "pid").write_text(str(z.pid))
        return z
