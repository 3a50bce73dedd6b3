"""Reading the run directories a site shows: config, summary, manifest, records and plots.

Every run is read as it is on disk, never re-scored: the page shows what the run's summary says.
Runs of different benchmarks are refused (their questions are different things); runs of one
benchmark under different settings are shown side by side, with the difference said.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.text.surrogates import repaired_if_escaped
from evalkit.multi.compare import label_all
from evalkit.rundir.costs import with_list_cost
from evalkit.rundir.identity import protocol_view, saved_settings
from evalkit.rundir.layout import read_finished
from evalkit.rundir.records import damaged_note

MANIFEST = "manifest.json"
# Settings that may differ between the models of one site without a note (who answered, and how).
PER_MODEL = {"model", "endpoint", "cache_tag", "max_tokens", "temperature", "seed", "top_p", "extra",
             "max_side", "max_pixels", "reasoning_effort", "thinking_budget", "detail", "media_resolution", "api", "data",
             "identity_version"}


@dataclass
class ViewRun:
    """One run directory as the page shows it."""

    path: Path
    label: str  # the model, made unique with the directory's name where two runs share one
    model: str  # provider/model as the run named it
    identity: dict[str, Any]  # in today's terms (protocol_view)
    config: dict[str, Any]
    summary: dict[str, Any]
    manifest: dict[str, Any] | None
    records: dict[str, Record]  # query id -> the last valid record
    options: dict[str, Any]  # what the benchmark's methods read (data, images, limits, ...)
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)  # query id -> fields Record does not hold
    plots: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unscored: frozenset[str] = frozenset()  # records kept but left out of the scores (summary.json says which)

    @property
    def benchmark(self) -> str:
        return str(self.identity.get("benchmark"))

    @property
    def provider(self) -> str:
        return self.model.partition("/")[0]

    @property
    def mode(self) -> str:
        return str(self.summary.get("mode") or self.identity.get("mode") or "official")


def read_view_run(path: Path) -> ViewRun:
    """One run directory; a folder that is not one, or has no summary yet, is a one-line error."""
    rundir, saved, summary = read_finished(Path(path))
    records = rundir.load_records()
    notes = [f"{rundir.path.name}: " + damaged_note(rundir.damaged, saved=False, then="they are not shown")
             ] if rundir.damaged else []
    try:
        options = saved_settings(saved).bench_dict()
    except EvalkitError as e:  # settings this evalkit no longer reads: the records still show
        options = {"data": saved.get("config", {}).get("data") or saved["identity"].get("data")}
        notes.append(f"{rundir.path.name}: its settings could not be read back ({e})")
    unscored = frozenset(summary.get("unscored_ids") or ())
    summary = with_list_cost(summary, saved.get("config"),  # a 0.3 summary's, from its records
                             (r for qid, r in records.items() if qid not in unscored))
    model = str(summary.get("model") or saved["identity"].get("model"))
    return ViewRun(rundir.path, model, model, protocol_view(saved["identity"]), saved.get("config") or {},
                   summary, _manifest(rundir.path), records, options, _extras(rundir.records_path),
                   sorted((rundir.path / "plots").glob("*.png")), notes, unscored)


def read_runs(paths: Sequence[str | Path]) -> list[ViewRun]:
    """The runs of one benchmark, labelled uniquely; different benchmarks are an error."""
    if not paths:
        raise EvalkitError("view needs at least one run directory")
    runs = [read_view_run(Path(p)) for p in paths]
    benches = {r.benchmark for r in runs}
    if len(benches) > 1:
        named = ", ".join(f"{r.path.name}: {r.benchmark}" for r in runs)
        raise EvalkitError(f"cannot view runs of different benchmarks together ({named}); view each benchmark apart")
    label_all(runs)
    return runs


def setting_notes(runs: Sequence[ViewRun]) -> list[str]:
    """Protocol settings the runs differ in: their numbers do not compare, though their answers still show."""
    keys = sorted({k for r in runs for k in r.identity} - PER_MODEL)
    notes = []
    for key in keys:
        values = {json.dumps(r.identity.get(key), sort_keys=True, default=str) for r in runs}
        if len(values) > 1:
            shown = "; ".join(f"{r.label}: {r.identity.get(key)!r}" for r in runs)
            notes.append(f"the runs differ in {key} ({shown}): their scores do not compare")
    return notes


def _manifest(folder: Path) -> dict[str, Any] | None:
    """manifest.json (evalkit 0.1.0 wrote none); an unreadable one is treated as absent."""
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_KNOWN = frozenset(Record.__dataclass_fields__)


def _extras(path: Path) -> dict[str, dict[str, Any]]:
    """Fields of records.jsonl lines that Record does not hold (a judge's reply, when a run kept it).

    One scan of the bytes decides whether any line has such a field, so the usual file is read
    once more at disk speed and never parsed twice."""
    try:
        blob = path.read_bytes()
    except OSError:
        return {}
    if b'"judge' not in blob:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for raw in blob.splitlines():
        if b'"judge' not in raw:
            continue
        try:
            text = raw.decode("utf-8")
            line = repaired_if_escaped(text, json.loads(text))
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(line, dict) and isinstance(line.get("query_id"), str):
            extra = {k: v for k, v in line.items() if k not in _KNOWN}
            if extra:
                out[line["query_id"]] = extra
    return out
