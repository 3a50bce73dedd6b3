"""`--to mlflow`: one MLflow run per evalkit run, through mlflow's own client (the `mlflow` extra).

params: the run's settings, flattened ("generation.max_tokens"); metrics: the official metrics'
numeric leaves by flattened name ("per_category/cat0"), with counts/, usage/ and headline/ (its 95%
interval) beside them; artifacts: report.md, summary.json, manifest.json and plots/. The tracking URI
is --tracking-uri, else MLFLOW_TRACKING_URI, else mlflow's default. MLflow allows only some characters
in a name: others become "_", and metric_names.json (an artifact) maps each changed name back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import import_sdk
from evalkit.export.runs import ExportRun, flat_settings, run_metrics

PARAM_VALUE_MAX = 6000  # characters MLflow keeps of a parameter's value
BATCH_METRICS = 1000  # MLflow's limits for one log_batch call
BATCH_PARAMS = 100
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_\-. /:]+")


def mlflow_name(name: str) -> str:
    """A metric or parameter name MLflow accepts: letters, digits, _ - . space / : (others become _)."""
    cleaned = _NOT_ALLOWED.sub("_", name.replace("(", "").replace(")", "")).strip()
    return re.sub(r"_+", "_", cleaned) or "_"


def export_mlflow(runs: Sequence[ExportRun], *, tracking_uri: str | None, experiment: str,
                  say: Any = print) -> list[str]:
    """Log each run; returns the MLflow run ids, in order."""
    mlflow = import_sdk("mlflow", "evalkit export --to mlflow")
    with _quiet():
        try:
            client = mlflow.MlflowClient(tracking_uri=tracking_uri)
            found = client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        except Exception as e:  # the store's own error (unreachable server, refused store, missing driver)
            raise EvalkitError(f"mlflow: cannot open the tracking store {tracking_uri or '(mlflow default)'}: "
                               f"{_short(e)}") from None
        ids = []
        for run in runs:
            try:
                ids.append(_log_run(mlflow, client, experiment_id, run))
            except Exception as e:
                done = f" ({len(ids)} earlier run{'s' if len(ids) != 1 else ''} logged)" if ids else ""
                raise EvalkitError(f"mlflow: {run.path}: {_short(e)}{done}") from None
            say(f"mlflow: {run.path} -> run {ids[-1]} in experiment {experiment!r}")
    return ids


def _log_run(mlflow: Any, client: Any, experiment_id: str, run: ExportRun) -> str:
    tags = {"evalkit.benchmark": run.benchmark, "evalkit.model": run.model, "evalkit.run_dir": run.name,
            "evalkit.mode": str(run.summary.get("mode") or ""), "evalkit.version": str(run.summary.get(
                "evalkit_version") or ""), "evalkit.complete": json.dumps(run.summary.get("complete"))}
    run_id = client.create_run(experiment_id, run_name=run.name, tags=tags).info.run_id
    try:
        _log_contents(mlflow.entities, client, run_id, run)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED" if run.summary.get("complete", True) else "KILLED")
    return run_id


def _log_contents(entities: Any, client: Any, run_id: str, run: ExportRun) -> None:
    params = [entities.Param(mlflow_name(k), v if len(v) <= PARAM_VALUE_MAX else v[:PARAM_VALUE_MAX - 1] + "…")
              for k, v in _unique(flat_settings(run.settings())).items()]
    renamed: dict[str, str] = {}  # logged name -> the official one, where they differ
    metrics: dict[str, Any] = {}
    stamp = int(time.time() * 1000)
    for name, value in run_metrics(run).items():
        logged = _free_name(mlflow_name(name), metrics)
        if logged != name:
            renamed[logged] = name
        metrics[logged] = entities.Metric(logged, value, stamp, 0)
    batch = list(metrics.values())
    for i in range(0, len(batch), BATCH_METRICS):
        client.log_batch(run_id, metrics=batch[i:i + BATCH_METRICS])
    for i in range(0, len(params), BATCH_PARAMS):
        client.log_batch(run_id, params=params[i:i + BATCH_PARAMS])
    for path in run.artifacts():
        client.log_artifact(run_id, str(path), artifact_path="plots" if path.parent.name == "plots" else None)
    if renamed:
        with tempfile.TemporaryDirectory() as tmp:
            names = Path(tmp) / "metric_names.json"
            names.write_text(json.dumps(renamed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            client.log_artifact(run_id, str(names))


def _unique(params: dict[str, str]) -> dict[str, str]:
    """Parameter names after cleaning, the first kept where two clean to one name."""
    out: dict[str, str] = {}
    for k, v in params.items():
        out.setdefault(mlflow_name(k), v)
    return out


def _free_name(name: str, taken: dict[str, Any]) -> str:
    candidate, i = name, 2
    while candidate in taken:
        candidate, i = f"{name}_{i}", i + 1
    return candidate


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """mlflow's and alembic's INFO lines (creating tables, migrations) kept off the console."""
    loggers = [logging.getLogger(n) for n in ("mlflow", "alembic")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _short(e: Exception) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__
