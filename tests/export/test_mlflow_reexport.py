"""Exporting a run to MLflow again updates its MLflow run instead of making a second one (issue 44, item 12).

Driven through `evalkit export RUN --to mlflow` (in the test's process: run_main) into a real local MLflow
store (SQLite, a copy of an empty one: the `mlflow_uri` fixture), read back with MLflow's own client. The
run is exported part way (its first records, scored by `evalkit report`), then whole: one MLflow run,
found by its `evalkit.run_id` tag, with the metrics, status and artifacts of the whole run. A run re-run
with another setting (`--concurrency`) changes a parameter, which MLflow keeps as first logged: a new
MLflow run, tagged with the one it follows, and one line saying so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_under_test import run_main
from export_run import CANARY, make_export_run

N_PART = 12  # of the run's 24 queries: the run as it stood part way


@pytest.fixture(scope="module")
def mlflow():
    return pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_export_run(tmp_path_factory.mktemp("reexport"))


def _export(run: Path, uri: str, cwd: Path) -> str:
    done = run_main(["export", str(run), "--to", "mlflow", "--tracking-uri", uri, "--project", "vlm-evals"], cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _report(run: Path) -> dict:
    done = run_main(["report", str(run)])
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: incomplete, as a stopped run is
    return json.loads((run / "summary.json").read_text(encoding="utf-8"))


def _runs(mlflow, uri: str) -> list:
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("vlm-evals")
    return client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])


def test_a_run_exported_again_updates_its_one_mlflow_run(mlflow, finished_run, mlflow_uri, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    lines = (run / "records.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run / "records.jsonl").write_text("".join(lines[:N_PART]), encoding="utf-8")
    part = _report(run)
    uri = mlflow_uri
    _export(run, uri, tmp_path)
    (run / "records.jsonl").write_text("".join(lines), encoding="utf-8")
    whole = _report(run)
    assert part["complete"] is False and whole["complete"] is True
    assert part["counts"]["correct"] != whole["counts"]["correct"]
    _export(run, uri, tmp_path)

    runs = _runs(mlflow, uri)
    assert len(runs) == 1, f"{len(runs)} MLflow runs for one evalkit run exported twice"
    (got,) = runs
    assert got.data.tags["evalkit.run_id"]
    assert got.data.metrics["counts/correct"] == whole["counts"]["correct"]
    assert got.data.metrics["circular_accuracy"] == whole["metrics"]["circular_accuracy"]
    assert got.info.status == "FINISHED" and got.data.tags["evalkit.complete"] == "true"
    client = mlflow.MlflowClient(tracking_uri=uri)
    history = [m.value for m in sorted(client.get_metric_history(got.info.run_id, "counts/correct"),
                                       key=lambda m: m.timestamp)]
    assert history == [part["counts"]["correct"], whole["counts"]["correct"]]
    local = Path(client.download_artifacts(got.info.run_id, "summary.json", str(tmp_path / "down")))
    assert json.loads(local.read_text(encoding="utf-8")) == whole  # the artifact updated too


def test_a_changed_parameter_makes_a_new_run_linked_to_the_old_one(mlflow, finished_run, mlflow_uri, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    uri = mlflow_uri
    _export(run, uri, tmp_path)
    saved = json.loads((run / "config.json").read_text(encoding="utf-8"))
    config = saved["config"]
    assert config["concurrency"] != 4
    again = run_main(["run", "mcq", "--model", "vllm/sim-model", "--data", config["data"], "--circular",
                     "--base-url", saved["identity"]["endpoint"], "--out", str(run), "--concurrency", "4",
                     "--cache-dir", str(finished_run.parent / "cache"), "--prices", config["price"]["source"]],
                    env={"VLLM_API_KEY": CANARY})
    assert again.returncode == 0, again.stdout + again.stderr  # complete already: nothing sent
    said = _export(run, uri, tmp_path)

    old, new = _runs(mlflow, uri)
    assert new.data.tags.get("evalkit.previous_run") == old.info.run_id
    assert new.data.tags["evalkit.run_id"] == old.data.tags["evalkit.run_id"]
    assert (old.data.params["concurrency"], new.data.params["concurrency"]) == (str(config["concurrency"]), "4")
    for name in ("circular_accuracy", "counts/correct", "headline/ci95_low"):  # the same answers, scored alike
        assert new.data.metrics[name] == old.data.metrics[name]
    notes = [line for line in said.splitlines() if "concurrency" in line]
    assert len(notes) == 1 and old.info.run_id in notes[0] and new.info.run_id in notes[0], said
    _export(run, uri, tmp_path)  # and again: the newest of the two is the one updated
    assert [r.info.run_id for r in _runs(mlflow, uri)] == [old.info.run_id, new.info.run_id]
