"""The same command on a complete run directory: reuse what the last full evaluation wrote.

A full evaluation of a run that has every answer re-grades every record, re-analyses them (with
its bootstrap) and rewrites summary.json, report.md, records.jsonl and manifest.json with the same
bytes; only summary.json's `this_run` (what this command did, and paid) and report.md's cost row
(which says what it paid) change. A run that ended complete leaves a stamp (STAMP) of what it was
computed from: a hash of the evalkit version, the run's identity, settings, data fingerprint (the
data's and images' sha256, memoised in the cache folder by size, mtime, inode and ctime) and lint,
and the size, mtime, inode and ctime of every file it wrote. When all of them are unchanged the next
run of the same command says what a full evaluation would say, sets `this_run` (and report.md's
cost row), and returns. Any difference (a record edited, a setting, the data, the version, a plot
removed) takes the full path, which writes a new stamp.

Only the plainest runs are stamped: no failed, judged, batched, budgeted, sharded, repeated, sampled or re-asked
query, no record outside the run, no line said after the results; anything else always takes the full
path. Nor is a --dry-run or --reask-cutoffs ever reused (a matrix's pair is, like any run).

With --out and local data (a file or folder, or the bundled sample) the check comes before the data is
even read (`reuse_command`): the stamp also holds a hash of the command (every setting, the endpoints,
the price, the working directory, the cache folder) and the size, mtime, inode and ctime of every
data file and image the run read; all unchanged, the items the data would give are the ones the
stamp was computed from. A run whose benchmark skipped items (missing images) is not checked early.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.benchmarks.run_settings import RunSettings
from evalkit.core.files import write_json_atomic, write_text_atomic
from evalkit.core.record import Record
from evalkit.core.version import __version__
from evalkit.engine.job import Job, Talk
from evalkit.engine.result import RunResult
from evalkit.money.pricing import Price
from evalkit.providers import ProviderSpec
from evalkit.report.markdown import restate_cost
from evalkit.rundir.layout import CONFIG, RECORDS, SUMMARY
from evalkit.rundir.lock import hold_run_dir
from evalkit.rundir.records import read_records

STAMP = ".reuse.json"
_WRITTEN = (CONFIG, RECORDS, SUMMARY, "report.md", "manifest.json")  # what a full evaluation rewrites


def inputs_key(job: Job) -> str:
    """sha256 of everything a full evaluation's outputs are computed from, but the records (the config
    without `generation_sent`, which the provider adds once it is open: it follows from the rest)."""
    cfg = job.s.config
    config = {k: v for k, v in job.config.items() if k != "generation_sent"}
    basis = {"evalkit": __version__, "identity": job.where.identity, "legacy": job.where.legacy, "config": config,
             "data": job.where.data.to_dict(), "settings": job.s.bench_dict(),
             "judge": job.judge_spec.label if job.judge_spec else None, "lint": job.lint.to_summary(),
             "plots": cfg.plots, "cutoff": job.cutoff_budget}
    text = json.dumps(basis, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _files(run_dir: Path) -> dict[str, list[int] | None]:
    """The stat of every file a full evaluation writes, and of the plots (removing one must redraw it)."""
    found = {name: _stat(run_dir / name) for name in _WRITTEN}
    plots = run_dir / "plots"
    if plots.is_dir():
        found.update({f"plots/{p.name}": _stat(p) for p in sorted(plots.iterdir())})
    return found


def stampable(job: Job, result: RunResult, *, said_before: int, plain: bool) -> bool:
    """Whether a full evaluation's outcome is one the next same command may reuse: complete, exit 0,
    every record answered without error, and no line said after the results (`said_before`: how many
    were said before the asking); `plain`: nothing judged, batched, budgeted, re-asked or outside."""
    cfg = job.s.config
    return (plain and result.exit_code == 0 and bool(result.summary.get("complete"))
            and "sample" not in result.summary  # a sample (--until-ci) is never the last full evaluation
            and len(result.messages) == said_before and not cfg.batch and not cfg.shard and cfg.repeats == 1
            and job.judge_spec is None and job.cutoff_budget is None and job.where.note is None
            and not job.where.rundir.data_changed and not job.where.rundir.v010_config
            and all(r.error is None for r in result.records))


def command_key(s: RunSettings, spec: ProviderSpec, judge: ProviderSpec | None, price: Price | None,
                env: Mapping[str, str]) -> str:
    """sha256 of the command as resolved before its data is read: what, with the data's files, decides
    everything the run computes."""
    basis = {"evalkit": __version__, "bench": s.bench_name, "settings": s.bench_dict(), "given": s.given,
             "model": [spec.label, spec.endpoint, spec.legacy_endpoint, spec.case_kept_endpoint],
             "judge": [judge.label, judge.endpoint] if judge else None, "price": price.__dict__ if price else None,
             "cwd": os.getcwd(), "cache": s.config.cache_path(env), "runs_root": str(s.hooks.get("runs_root"))}
    text = json.dumps(basis, sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(job: Job) -> list[str] | None:
    """The data files and images the run read (None: not local data, or items were skipped)."""
    prepared = job.prepared
    if prepared.source.kind not in ("local", "sample") or getattr(prepared.bench, "skipped", None):
        return None
    return sorted({str(prepared.data), *(str(p) for p in prepared.files), *job.where.known})


def write_stamp(job: Job, n_records: int, opening: list[tuple[bool, str]], command: str) -> None:
    """Record what the run's files were computed from, once they are all written. `opening`: the lines
    said before the asking; `command`: command_key (checked before the data is read, with --out)."""
    path = job.where.rundir.path
    stamp: dict[str, Any] = {"key": inputs_key(job), "records": n_records, "files": _files(path),
                             "opening": opening}
    read = _read(job) if job.s.config.out else None
    if read is not None:
        stamp.update({"command": command, "read": {p: _stat(Path(p)) for p in read}})
    with contextlib.suppress(OSError):  # a stamp that cannot be written only costs the next run the full path
        write_json_atomic(path / STAMP, stamp)


def forget_stamp(run_dir: Path) -> None:
    """The run directory is about to change: no stamp may describe it."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(run_dir / STAMP)


class _Reused(RunResult):
    """A RunResult whose records are read from records.jsonl when first asked for (the CLI never asks:
    reading 5,000 records costs more than the rest of such a run)."""

    _records: list[Record] | None = None
    n_records: int = 0

    def __repr__(self) -> str:  # without reading the records (asyncio.run formats the result it returns)
        s = self.summary
        return (f"RunResult({s.get('benchmark')!r}, {s.get('model')!r}, {self.n_records} records, "
                f"exit_code={self.exit_code}, out_dir={str(self.out_dir)!r})")

    @property  # type: ignore[override]
    def records(self) -> list[Record]:
        if self._records is None:
            self._records = list(read_records(self.out_dir / RECORDS).records.values())
        return self._records

    @records.setter
    def records(self, value: list[Record] | None) -> None:
        self._records = value


def reuse(job: Job, talk: Talk, say_opening: Callable[[Talk], None]) -> RunResult | None:
    """The result of a full evaluation of this job, from the run directory, when its stamp says nothing
    changed (else None). `say_opening(talk)` says the lines a full evaluation says first."""
    path = job.where.rundir.path
    try:
        stamp = json.loads((path / STAMP).read_text(encoding="utf-8"))
        if stamp["files"] != _files(path) or stamp["key"] != inputs_key(job):
            return None
        summary = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    say_opening(talk)
    return _reused(path, stamp, summary, talk)


def reuse_command(s: RunSettings, command: str, console: Console) -> RunResult | None:
    """`reuse` before the data is read: --out's stamp names this command, and no data file or image it
    read, nor any file the run wrote, changed since (None: read the data and take the usual way)."""
    path = Path(s.config.out or "")
    try:
        stamp = json.loads((path / STAMP).read_text(encoding="utf-8"))
        if stamp.get("command") != command or not isinstance(stamp["read"], dict):
            return None
        if any(_stat(Path(p)) != st for p, st in stamp["read"].items()):
            return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    with hold_run_dir(path):  # one process per run directory, until its last write
        try:
            if stamp != json.loads((path / STAMP).read_text(encoding="utf-8")) or stamp["files"] != _files(path):
                return None
            summary = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError, KeyError):
            return None
        talk = Talk(console)
        talk.replay([(bool(kept), str(line)) for kept, line in stamp.get("opening", [])])
        return _reused(path, stamp, summary, talk)


def _reused(path: Path, stamp: dict[str, Any], summary: Any, talk: Talk) -> RunResult | None:
    """What the full evaluation would return: its summary with this command's `this_run`."""
    n = stamp.get("records")
    if not isinstance(summary, dict) or not isinstance(n, int):
        return None
    talk.tell(f"all {n:,} queries already answered: nothing to ask")
    this_run = {"sent": 0, "from_cache": 0, "already": n, "cost_usd": 0.0}
    if summary.get("this_run") != this_run:
        before = dict(summary)
        summary["this_run"] = this_run
        write_json_atomic(path / SUMMARY, summary)
        with contextlib.suppress(OSError):  # and report.md's cost row: this command paid nothing
            report = (path / "report.md").read_text(encoding="utf-8")
            if (restated := restate_cost(report, before, summary)) != report:
                write_text_atomic(path / "report.md", restated)
        with contextlib.suppress(OSError):  # summary.json and report.md are the only files that changed
            write_json_atomic(path / STAMP, {**stamp, "files": _files(path)})
    result = _Reused(summary, None, path, 0, talk.messages)  # type: ignore[arg-type]
    result.n_records = n
    return result
