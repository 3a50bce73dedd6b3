"""The run directory: config.json, records.jsonl (append-only while asking), summary.json.

records.jsonl is appended one line per finished query. Lines are buffered and written in
batches: at most FLUSH_INTERVAL_S (100 ms) after the first of them (a thread of the RunDir's own,
started by the first buffered line and stopped by close()), at flush()/close(), at interpreter
exit, and on SIGINT/SIGTERM (engine/stopping/shutdown.py). A run killed with SIGKILL therefore loses at
most the last 100 ms of records, whose answers are in received.jsonl (RECEIVED: each answer appended as it
arrives, replayed by the next run; ask/store/received.py) and, milliseconds later, in the response cache. With
`immediate=True` (--no-cache: nothing else keeps the answers) every line is written as it
arrives, as in 0.1.0. Loading skips damaged lines (rundir/records.py) and the next rewrite first
saves them to records.damaged.jsonl. The line format is 0.1.0's, byte for byte.

A write that fails (a full disk) keeps its lines buffered and cuts the file back to where it was, so
no torn line is left for the next try to join; `write_error` holds the first such error, and the run
stops sending at it (engine/stopping/write_stop.py). The flusher tries again every RETRY_S; `give_up` makes a
last try and hands back the lines that still could not be written.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sized
from pathlib import Path
from typing import Any, TextIO

from evalkit.core.errors import EvalkitError
from evalkit.core.files import write_json_atomic
from evalkit.core.record import Record
from evalkit.rundir.identity import describe_data_change
from evalkit.rundir.records import DamagedLine, read_records, record_line, save_damaged

RECORDS = "records.jsonl"
CONFIG = "config.json"
SUMMARY = "summary.json"
RECEIVED = "received.jsonl"  # answers received, journaled before anything else (ask/store/received.py)
FLUSH_INTERVAL_S = 0.1  # buffered records reach the file at most this long after the first of them
RETRY_S = 1.0  # after a failed write, the flusher tries again this long after


_LIVE: weakref.WeakSet[RunDir] = weakref.WeakSet()  # run directories with buffered lines or an open file


@atexit.register
def _flush_all_at_exit() -> None:
    for rundir in list(_LIVE):
        with contextlib.suppress(Exception):  # nothing left to report to at exit
            rundir.close()


def remove_own_dir(path: Path, own: set[str]) -> bool:
    """rmdir `path` after unlinking its files named in `own`, only when it holds nothing else."""
    try:
        entries = list(path.iterdir())
        if any(p.name not in own or not p.is_file() for p in entries):
            return False
        for p in entries:
            p.unlink()
        path.rmdir()
        return True
    except OSError:
        return False  # best effort: what is left is harmless


def settings_hash(settings: dict[str, Any]) -> str:
    """Short stable hash of the output-affecting settings: the default run directory's suffix."""
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def other_data(path: Path, saved: Any, now: Mapping[str, str] | None, then: str) -> EvalkitError:
    """The one line refusing to grade a run directory's answers on data that changed since they were
    given (`saved`, `now`: the halves of the data fingerprint, identity.DataFingerprint), naming what
    changed and, in `then`, how to go on. `evalkit run` and `evalkit report` both say it."""
    what = describe_data_change(saved, now)
    return EvalkitError(f"run directory {path} holds answers to other data ({what} changed since); {then}")


def default_run_dir(bench: str, model_label: str, settings: dict[str, Any], root: Path = Path("runs")) -> Path:
    safe_model = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_label)
    return root / f"{bench}-{safe_model}-{settings_hash(settings)}"


class RunDir:
    """A run's folder. `append` buffers records.jsonl lines (see the module docstring); with
    immediate=True each line is written and flushed before append returns. Thread-safe. `clock`
    (monotonic seconds) times the batches: tests move it by hand to see when a batch falls due."""

    def __init__(self, path: Path, *, immediate: bool = False, flush_interval_s: float = FLUSH_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic):
        self.path = Path(path)
        self.immediate = immediate  # --no-cache: write each line as it arrives
        self.flush_interval_s = flush_interval_s
        self._clock = clock
        self._fh: TextIO | None = None
        self._pending: list[str] = []
        self._lines_loaded = -1  # lines the last load_records() read (-1: none yet)
        self._clean = False  # the last load_records() found every line valid, once, newline-terminated
        self._data: dict[str, str] | None = None  # halves of the data fingerprint, kept in config.json
        self.damaged: list[DamagedLine] = []  # found by the last load_records(), not yet saved by a rewrite
        self.data_changed = False  # bind() took a new data fingerprint (--reask-changed)
        self.v010_config = False  # bind() found config.json in 0.1.0's form (and rewrote it in today's)
        self._due = 0.0  # when the oldest buffered line must be written
        self._lock = threading.Lock()  # guards _pending, _due and the flusher's state
        self._wake = threading.Condition(self._lock)
        self._flusher: threading.Thread | None = None
        self._stopping = False
        self._io_lock = threading.RLock()  # guards _fh; held while writing, so batches stay in order
        self.write_error: OSError | None = None  # the first failed write of records.jsonl (the run stops sending)
        # what append() made since the last load_records(), in order: the final rewrite reuses these lines, and
        # is skipped when the file holds exactly them in the final order (records are replaced, never changed
        # in place, once appended)
        self._made: list[tuple[Record, str]] = []

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS

    @property
    def received_path(self) -> Path:
        """The journal of answers received and not yet known to be recorded (SIGKILL-safe; ask/store/received.py)."""
        return self.path / RECEIVED

    # ---- config ------------------------------------------------------------------------
    def bind(self, identity: dict[str, Any], config: dict[str, Any], legacy: dict[str, Any] | None = None, *,
             data: dict[str, str] | None = None, reask_changed: bool = False) -> str | None:
        """Create the directory, or check an existing one holds the same run (same identity).

        A directory written by 0.1.0 holds its identity in the old form: it is the same run when that
        equals `legacy` (0.1.0's identity for this command), and its config is then rewritten in
        today's form. A run that differs only in its data's content (`data`: the halves of the data
        fingerprint, see identity.DataFingerprint) is refused with what changed named, unless
        `reask_changed`: then the directory takes the new identity, and the resume re-asks exactly
        the queries whose request changed (resume.py). Returns a one-line note when either happened."""
        self.path.mkdir(parents=True, exist_ok=True)
        cfg_path = self.path / CONFIG
        note = None
        self._data = data
        if cfg_path.exists():
            try:
                old = json.loads(cfg_path.read_text(encoding="utf-8"))
                old_identity = old.get("identity", {})
                if not isinstance(old_identity, dict):
                    raise ValueError("its identity is not an object")
            except (ValueError, AttributeError) as e:
                raise EvalkitError(f"{cfg_path}: unreadable ({e}); remove it or choose another --out") from e
            expected = legacy if legacy is not None and "identity_version" not in old_identity else identity
            diff = sorted(k for k in set(old_identity) | set(expected) if old_identity.get(k) != expected.get(k))
            if diff == ["data_sha256"]:
                if not reask_changed:
                    raise other_data(self.path, old.get("data_fingerprint"), data,
                                     "add --reask-changed to ask the changed queries again, or choose another --out")
                what = describe_data_change(old.get("data_fingerprint"), data)
                note = f"{what} changed since {self.path} was written: asking the changed queries again"
                self.data_changed = True
            elif diff:
                raise EvalkitError(f"run directory {self.path} holds a run with different settings "
                                   f"({', '.join(diff)}); choose another --out")
            if expected is legacy:
                self.v010_config = True
                note = f"resuming {self.path}, written by evalkit 0.1.0 (config.json rewritten in today's form)"
        self.write_config(identity, config)
        return note

    def remove_if_empty(self) -> bool:
        """Remove a directory this run created when it holds no answer (only config.json, the lock
        file, an empty records file): a run that could not start leaves nothing behind. True if removed."""
        from evalkit.rundir.lock import LOCK_FILE

        self.close()
        if self.records_path.exists() and self.records_path.stat().st_size:
            return False
        return remove_own_dir(self.path, {CONFIG, LOCK_FILE, RECORDS, "lint.json"})

    def write_config(self, identity: dict[str, Any], config: dict[str, Any]) -> None:
        saved: dict[str, Any] = {"identity": identity, "config": config}
        if self._data is not None:
            saved["data_fingerprint"] = self._data
        write_json_atomic(self.path / CONFIG, saved)

    def read_config(self) -> dict[str, Any]:
        cfg_path = self.path / CONFIG
        if not cfg_path.exists():
            raise EvalkitError(f"{self.path} is not an evalkit run directory (no {CONFIG})")
        try:
            saved = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise EvalkitError(f"{cfg_path}: unreadable ({e})") from e
        if not isinstance(saved, dict) or not isinstance(saved.get("identity"), dict):
            raise EvalkitError(f"{cfg_path}: not an evalkit config (no identity)")
        return saved

    # ---- records -----------------------------------------------------------------------
    def load_records(self) -> dict[str, Record]:
        """Last valid record per query id. Damaged lines (a torn write, a bad byte, a wrong-typed
        field) are skipped and listed in `damaged`; an unreadable records.jsonl is an EvalkitError."""
        self.flush()
        found = read_records(self.records_path)
        self._lines_loaded, self._clean, self.damaged = found.lines, found.clean, found.damaged
        self._made = []
        return found.records

    def holds_exactly(self, kept: Sized) -> bool:
        """True when records.jsonl, as the last load_records() read it, is one line per record of
        `kept` (a subset of what it returned) and nothing else: no error, duplicate, damaged or torn
        line to compact away, so a resume need not rewrite it."""
        return self.records_path.exists() and self._clean and self._lines_loaded == len(kept)

    def rewrite_records(self, records: Iterable[Record]) -> None:
        """Atomically replace records.jsonl (compaction on resume, final parsed/judged fields). Damaged
        lines the last load found are appended to records.damaged.jsonl first: never silently lost."""
        records = list(records)
        self.close()  # (not under _io_lock: close joins the flusher, which may be waiting for it)
        with self._io_lock:
            made, self._made = self._made, []
            if self._holds_in_order(records, made):  # a fresh run answered in query order: already written
                return
            save_damaged(self.path, self.damaged)
            self.damaged = []
            lines = {id(rec): line for rec, line in made}  # (made keeps its records alive: ids are theirs)
            tmp = self.records_path.with_suffix(".jsonl.tmp")
            with tmp.open("w", encoding="utf-8") as f:
                f.writelines(lines.get(id(rec)) or record_line(rec) for rec in records)
            os.replace(tmp, self.records_path)

    def _holds_in_order(self, records: list[Record], made: list[tuple[Record, str]]) -> bool:
        """True when records.jsonl is byte for byte what a rewrite of `records` would write: it held no
        line at the last load, and every line since is append()'s line of `records`, in their order."""
        if self.damaged or self.write_error is not None or self._lines_loaded != 0 or len(made) != len(records):
            return False
        if any(rec is not mine for rec, (mine, _) in zip(records, made, strict=True)):
            return False
        try:
            size = self.records_path.stat().st_size if made else 0
        except OSError:
            return False
        return size == sum(len(line.encode("utf-8")) for _, line in made)

    def append(self, record: Record) -> None:
        """Add one record's line: written now (immediate) or within flush_interval_s."""
        line = record_line(record)
        if self.immediate:
            with self._io_lock:
                with self._lock:  # after the lines buffered before the switch to immediate, or a failed write
                    self._pending.append(line)
                    self._made.append((record, line))
                with contextlib.suppress(OSError):  # kept buffered: write_error stops the run, give_up counts them
                    self.flush()
            return
        with self._lock:
            self._pending.append(line)
            self._made.append((record, line))
            if len(self._pending) > 1:
                return
            self._due = self._clock() + self.flush_interval_s
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, name="evalkit-records-flush", daemon=True)
                self._flusher.start()
            else:
                self._wake.notify()
        _LIVE.add(self)

    def _flush_loop(self) -> None:
        """The flusher thread: write the buffer when its oldest line falls due, until close()."""
        while True:
            with self._wake:
                while not self._stopping:
                    if not self._pending:
                        self._wake.wait()
                        continue
                    wait = self._due - self._clock()
                    if wait <= 0:
                        break
                    self._wake.wait(wait)
                if self._stopping:
                    return
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the lines stay buffered (write_error, close() report it): retry later
                with self._lock:
                    self._due = self._clock() + RETRY_S

    def flush(self) -> None:
        """Write every buffered line now (the periodic flusher, close, and signal handlers call it)."""
        with self._io_lock:
            with self._lock:
                lines, self._pending = self._pending, []
            if not lines:
                return
            start = self._end()
            try:
                self._write(lines)
            except BaseException as e:
                with self._lock:  # keep them for the next attempt (close reports the error)
                    self._pending[:0] = lines
                if isinstance(e, OSError):
                    self._cut_back(start)
                    if self.write_error is None:
                        self.write_error = e
                raise

    def _end(self) -> int:
        """The size of records.jsonl before a write (every earlier write has reached the OS)."""
        try:
            return os.fstat(self._fh.fileno()).st_size if self._fh is not None else self.records_path.stat().st_size
        except OSError:
            return 0

    def _cut_back(self, size: int) -> None:
        """After a failed write: drop the handle (and what its buffer holds) and cut the file back to
        `size`, so a later write starts on a fresh line. Shrinking a file needs no space."""
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()
        with contextlib.suppress(OSError):
            if self.records_path.stat().st_size > size:
                os.truncate(self.records_path, size)

    @property
    def buffered(self) -> int:
        """Lines received and not yet written."""
        with self._lock:
            return len(self._pending)

    def give_up(self) -> list[str]:
        """close(), as a last try to write what is buffered; the lines that still could not be
        written are handed back and forgotten (a later close() does not try them again)."""
        try:
            self.close()
            return []
        except OSError:
            with self._io_lock:
                with self._lock:
                    lines, self._pending = self._pending, []
                self._cut_back(self._end())
                _LIVE.discard(self)
            return lines

    def _write(self, lines: list[str]) -> None:
        """Append lines and flush them to the OS (caller holds _io_lock)."""
        if self._fh is None:
            self._fh = self.records_path.open("a", encoding="utf-8")
            _LIVE.add(self)
        self._fh.write("".join(lines))
        self._fh.flush()

    def close(self) -> None:
        """Flush buffered lines, stop the flusher thread and close records.jsonl (a later append
        opens it again)."""
        with self._lock:
            flusher, self._flusher = self._flusher, None
            self._stopping = flusher is not None
            self._wake.notify_all()
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join()
        with self._lock:
            self._stopping = False
        with self._io_lock:
            self.flush()
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            _LIVE.discard(self)

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.path / SUMMARY, summary)

    def read_summary(self) -> dict[str, Any]:
        return json.loads((self.path / SUMMARY).read_text(encoding="utf-8"))


def read_finished(path: Path) -> tuple[RunDir, dict[str, Any], dict[str, Any]]:
    """A run directory that has scored: (it, its config, its summary). Not a run directory, or no
    readable summary yet, is a one-line error saying what to do (compare and view read runs so)."""
    rundir = RunDir(Path(path))
    saved = rundir.read_config()
    summary_path = rundir.path / SUMMARY
    if not summary_path.exists():
        raise EvalkitError(f"{summary_path}: missing; finish the run or rebuild it with `evalkit report {path}`")
    try:
        summary = rundir.read_summary()
    except (OSError, ValueError) as e:
        raise EvalkitError(f"{summary_path}: unreadable ({e}); rebuild it with `evalkit report {path}`") from e
    return rundir, saved, summary
