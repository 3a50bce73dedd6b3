"""`evalkit export`: finished run directories to where teams keep results.

    import evalkit.export
    evalkit.export.export(["runs/a", "runs/b"], "csv", out="all.csv")     # -> [Path('all.csv')]

Targets: `eee` (Every Eval Ever's aggregate JSON and instance JSON Lines), `mlflow` and `wandb` (one
tracker run per evalkit run; the `mlflow` and `wandb` extras), `csv` and `jsonl` (one row per query,
every run's rows in one file). Runs are read, never re-scored, and every run is read before anything
is written, so a bad run directory writes nothing. Importing this is light: each target on use.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from evalkit.core.errors import EvalkitError

__all__ = ["TARGETS", "export"]

TARGETS = ("eee", "mlflow", "wandb", "csv", "jsonl")
DEFAULT_PROJECT = "evalkit"  # the MLflow experiment and the W&B project, unless named
DEFAULT_ORGANIZATION = "unspecified"  # EEE's source_organization_name, unless --organization names it


def _default_out(run_dirs: Sequence[Path], to: str) -> Path:
    """RUN_DIR/export/… for one run, runs/export/… for several: queries.csv, queries.jsonl, eee/."""
    folder = run_dirs[0] / "export" if len(run_dirs) == 1 else Path("runs") / "export"
    return folder / {"csv": "queries.csv", "jsonl": "queries.jsonl", "eee": "eee"}[to]


def export(run_dirs: Sequence[str | Path], to: str, *, out: str | Path | None = None,
           tracking_uri: str | None = None, project: str | None = None, organization: str | None = None,
           say: Callable[[str], None] | None = None) -> list[Path | str]:
    """Export the runs to `to`; returns what was written: the CSV or JSON Lines file, the EEE files
    (aggregate, instances, run by run), the MLflow run ids, or the W&B run folders."""
    if to not in TARGETS:
        raise EvalkitError(f"--to {to}: not a target ({', '.join(TARGETS)})")
    _check_options(to, out=out, tracking_uri=tracking_uri, project=project, organization=organization)
    if to in ("eee", "wandb") and out is not None and Path(out).exists() and not Path(out).is_dir():
        raise EvalkitError(f"--out {out}: a file; --to {to} writes into a folder")
    from evalkit.export.runs import read_export_run

    paths = list(dict.fromkeys(Path(p) for p in run_dirs))
    if not paths:
        raise EvalkitError("export: name at least one run directory")
    runs = [read_export_run(p, records=to in ("eee", "csv", "jsonl")) for p in paths]
    tell = say or (lambda _line: None)
    for run in runs:
        for note in run.notes:
            tell(f"{run.path}: {note}")
    if to in ("csv", "jsonl"):
        from evalkit.export.query_rows import write_csv, write_jsonl

        target = Path(out) if out is not None else _default_out(paths, to)
        if target.is_dir():  # a folder: the file goes in it
            target = target / _default_out(paths, to).name
        n = (write_csv if to == "csv" else write_jsonl)(runs, target)
        tell(f"wrote {n:,} rows ({len(runs)} run{'s' if len(runs) != 1 else ''}) to {target}")
        return [target]
    if to == "eee":
        from evalkit.export.to_eee import write_eee

        folder = Path(out) if out is not None else _default_out(paths, to)
        now = time.time()
        written: list[Path | str] = []
        for run in runs:
            files = write_eee(run, folder, organization=organization or DEFAULT_ORGANIZATION, now=now)
            written.extend(files)
            tell(f"wrote {files[0]} and {files[1].name}")
        return written
    if to == "mlflow":
        from evalkit.export.to_mlflow import export_mlflow

        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
        name = project or os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_PROJECT
        return list(export_mlflow(runs, tracking_uri=uri, experiment=name, say=tell))
    from evalkit.export.to_wandb import export_wandb

    name = project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT
    return list(export_wandb(runs, project=name, out_dir=Path(out) if out is not None else None, say=tell))


def _check_options(to: str, **given: object) -> None:
    """A flag that means nothing for the target is refused, not ignored."""
    applies = {"out": ("eee", "csv", "jsonl", "wandb"), "tracking_uri": ("mlflow",),
               "project": ("mlflow", "wandb"), "organization": ("eee",)}
    for name, value in given.items():
        if value is not None and to not in applies[name]:
            flag = "--" + name.replace("_", "-")
            raise EvalkitError(f"{flag} does not apply to --to {to} (only to {', '.join(applies[name])})")
