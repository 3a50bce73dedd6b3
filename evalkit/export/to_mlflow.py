"""`--to mlflow`: one MLflow run per evalkit run, through mlflow's own client (the `mlflow` extra).

params: the run's settings, flattened ("generation.max_tokens"); metrics: the official metrics'
numeric leaves by flattened name ("per_category/cat0"), with counts/, usage/ and headline/ (its 95%
interval) beside them; artifacts: report.md, summary.json, manifest.json and plots/. The tracking URI
is --tracking-uri, else MLFLOW_TRACKING_URI, else mlflow's default. MLflow allows only some characters
in a name: others become "_", and metric_names.json (an artifact) maps each changed name back.

Exported again, a run updates its MLflow run (found by the tag `evalkit.run_id`: the run identity and
data fingerprint) instead of making a second one; where a parameter changed, which MLflow refuses to
change, a new MLflow run is made, tagged `evalkit.previous_run` with the one it follows.
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
BATCH_METRICS = 1000  # MLflow's limits for one log_batch call: 1,000 entries in all, 100 of them params
BATCH_PARAMS = 100  # (and 100 tags)
RUN_KEY_TAG = "evalkit.run_id"  # the run identity and data fingerprint (ExportRun.run_key): one MLflow run per run
PREVIOUS_TAG = "evalkit.previous_run"  # on a run made because a parameter changed: the MLflow run it follows
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
                run_id, updated = _log_run(mlflow, client, experiment_id, run, say)
                ids.append(run_id)
            except Exception as e:
                done = f" ({len(ids)} earlier run{'s' if len(ids) != 1 else ''} logged)" if ids else ""
                raise EvalkitError(f"mlflow: {run.path}: {_short(e)}{done}") from None
            say(f"mlflow: {run.path} -> run {run_id} in experiment {experiment!r}" + (" (updated)" if updated else ""))
    return ids


def _log_run(mlflow: Any, client: Any, experiment_id: str, run: ExportRun, say: Any) -> tuple[str, bool]:
    """The run's MLflow run: the one an earlier export made (found by its `evalkit.run_id` tag) updated in
    place, or a new one; new too where a parameter changed (MLflow keeps a parameter as first logged),
    then tagged with the run it follows."""
    key = run.run_key()
    tags = {"evalkit.benchmark": run.benchmark, "evalkit.model": run.model, "evalkit.run_dir": run.name,
            "evalkit.mode": str(run.summary.get("mode") or ""), "evalkit.version": str(run.summary.get(
                "evalkit_version") or ""), "evalkit.complete": json.dumps(run.summary.get("complete")),
            RUN_KEY_TAG: key}
    params = _params(mlflow.entities, run)
    earlier = _exported(client, experiment_id, key)
    stamp = int(time.time() * 1000)
    if earlier is not None:
        changed = [p.key for p in params if p.key in earlier.data.params and earlier.data.params[p.key] != p.value]
        if not changed:
            run_id = earlier.info.run_id
            new_params = [p for p in params if p.key not in earlier.data.params]
            # a later stamp than anything logged before, so the updated values are the run's latest
            stamp = max(stamp, int(earlier.info.end_time or earlier.info.start_time or 0) + 1)
            _logged(mlflow.entities, client, run_id, run, new_params, tags, stamp)
            return run_id, True
        tags[PREVIOUS_TAG] = earlier.info.run_id
    run_id = client.create_run(experiment_id, run_name=run.name, tags=tags).info.run_id
    if earlier is not None:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        say(f"mlflow: {run.path}: {shown} changed since run {earlier.info.run_id} was logged, and MLflow keeps a "
            f"parameter as first logged: new run {run_id}, tagged {PREVIOUS_TAG}={earlier.info.run_id}")
    _logged(mlflow.entities, client, run_id, run, params, {}, stamp)
    return run_id, False


def _exported(client: Any, experiment_id: str, key: str) -> Any:
    """The latest MLflow run an earlier export of this run made (None: never exported to this experiment)."""
    found = client.search_runs([experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = '{key}'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    return found[0] if found else None


def _logged(entities: Any, client: Any, run_id: str, run: ExportRun, params: list[Any], tags: dict[str, str],
            stamp: int) -> None:
    """Log the contents, then close the run: FINISHED, KILLED for an incomplete run, FAILED if logging failed."""
    try:
        _log_contents(entities, client, run_id, run, params, tags, stamp)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED" if run.summary.get("complete", True) else "KILLED")


def _params(entities: Any, run: ExportRun) -> list[Any]:
    return [entities.Param(mlflow_name(k), v if len(v) <= PARAM_VALUE_MAX else v[:PARAM_VALUE_MAX - 1] + "…")
            for k, v in _unique(flat_settings(run.settings())).items()]


def _log_contents(entities: Any, client: Any, run_id: str, run: ExportRun, params: list[Any],
                  tags: dict[str, str], stamp: int) -> None:
    renamed: dict[str, str] = {}  # logged name -> the official one, where they differ
    metrics: dict[str, Any] = {}
    for name, value in run_metrics(run).items():
        logged = _free_name(mlflow_name(name), metrics)
        if logged != name:
            renamed[logged] = name
        metrics[logged] = entities.Metric(logged, value, stamp, 0)
    for part in _batches(list(metrics.values()), params, [entities.RunTag(k, v) for k, v in tags.items()]):
        client.log_batch(run_id, **part)
    for path in run.artifacts():
        client.log_artifact(run_id, str(path), artifact_path="plots" if path.parent.name == "plots" else None)
    if renamed:
        with tempfile.TemporaryDirectory() as tmp:
            names = Path(tmp) / "metric_names.json"
            names.write_text(json.dumps(renamed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            client.log_artifact(run_id, str(names))


def _batches(metrics: list[Any], params: list[Any], tags: list[Any]) -> Iterator[dict[str, list[Any]]]:
    """As few log_batch calls as MLflow's limits allow (1,000 entries, 100 of them params, 100 tags)."""
    while metrics or params or tags:
        p, t = params[:BATCH_PARAMS], tags[:BATCH_PARAMS]
        m = metrics[:BATCH_METRICS - len(p) - len(t)]
        yield {"metrics": m, "params": p, "tags": t}
        metrics, params, tags = metrics[len(m):], params[len(p):], tags[len(t):]


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
