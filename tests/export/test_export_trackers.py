"""`evalkit export --to mlflow|wandb`: one tracker run per evalkit run, read back with the trackers' own
code: MLflow's MlflowClient over a local SQLite store, W&B's offline run files (its .wandb log of
protobuf records, read with wandb's own Record type). Nothing reaches the network; no export carries
the API key the run was asked with. Importing mlflow takes seconds: this module keeps to two tests."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from export_run import canary_in
from synthetic_data import FIXTURES

from evalkit.export import export
from evalkit.export.runs import flat_numbers, read_export_run, run_metrics
from evalkit.export.to_mlflow import mlflow_name


# imported by the test that needs it, not at collection: every test worker collects this module, and
# mlflow and wandb take a second or more each to import
@pytest.fixture(scope="module")
def mlflow():
    return pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def wandb():
    return pytest.importorskip("wandb")


def test_mlflow_run_is_read_back_from_a_sqlite_store_with_mlflows_client(mlflow, run_dir, mlflow_uri, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)  # mlflow keeps artifacts beside the store's working folder (./mlruns)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = mlflow_uri  # a fresh store (a copy of an empty one)
    (run_id,) = export([run_dir], "mlflow", tracking_uri=uri, project="vlm-evals")
    client = mlflow.MlflowClient(tracking_uri=uri)
    got = client.get_run(run_id)
    assert got.info.run_name == run_dir.name and got.info.status == "FINISHED"
    assert got.info.experiment_id == client.get_experiment_by_name("vlm-evals").experiment_id
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    metrics = got.data.metrics
    assert metrics["circular_accuracy"] == summary["metrics"]["circular_accuracy"]
    assert metrics["per_category/cat2"] == summary["metrics"]["per_category"]["cat2"]
    assert metrics["counts/correct"] == summary["counts"]["correct"]
    assert metrics["usage/cost_usd"] == pytest.approx(summary["usage"]["cost_usd"])
    assert [metrics["headline/ci95_low"], metrics["headline/ci95_high"]] == summary["headline"]["ci95"]
    assert set(metrics) == set(run_metrics(read_export_run(run_dir)))  # every name already allowed: none renamed
    params = got.data.params
    assert params["generation.max_tokens"] == "1024" and params["options.circular"] == "true"
    assert params["data_source.kind"] == "local" and params["benchmark"] == "mcq"
    assert got.data.tags["evalkit.model"] == "vllm/sim-model"
    top = {a.path for a in client.list_artifacts(run_id)}
    assert top == {"report.md", "summary.json", "manifest.json", "plots"}
    assert [a.path for a in client.list_artifacts(run_id, "plots")] == ["plots/tiny.png"]
    local = Path(client.download_artifacts(run_id, "summary.json", str(tmp_path / "down")))
    assert json.loads(local.read_text(encoding="utf-8")) == summary
    assert canary_in(tmp_path) == []  # the store, the artifacts
    from mlflow.utils.validation import _validate_metric_name

    for path in (FIXTURES / "v010").glob("*/runs/*/summary.json"):  # every benchmark's
        names = {mlflow_name(n) for n in flat_numbers(json.loads(path.read_text(encoding="utf-8"))["metrics"])}
        for name in names:
            _validate_metric_name(name)  # MLflow's own check accepts every cleaned name


def _wandb_records(path: Path) -> list:
    """The records of a .wandb file: W&B's header, then LevelDB-log blocks of protobuf `Record`s."""
    from wandb.proto import wandb_internal_pb2

    raw = path.read_bytes()
    assert raw[:4] == b":W&B"
    pos, block, pending, out = 7, 32768, b"", []
    while pos + 7 <= len(raw):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[pos:pos + 7])
        pending += raw[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def test_wandb_offline_run_files_hold_the_metrics_config_and_files(wandb, run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    (folder,) = export([run_dir], "wandb", project="vlm-evals")
    assert folder.parent == tmp_path / "wandb" and folder.name.startswith("offline-run-")
    files = folder / "files"
    for name in ("report.md", "summary.json", "manifest.json", "plots/tiny.png"):
        assert (files / name).read_bytes() == (run_dir / name).read_bytes() and not (files / name).is_symlink()
    (log,) = folder.glob("run-*.wandb")
    records = _wandb_records(log)
    summary_items = {u.key: json.loads(u.value_json) for r in records if r.WhichOneof("record_type") == "summary"
                     for u in r.summary.update if u.key}
    expected = run_metrics(read_export_run(run_dir))
    assert {k: summary_items[k] for k in expected} == expected
    (start,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert start.project == "vlm-evals" and start.display_name == run_dir.name
    config = {item.key: json.loads(item.value_json) for item in start.config.update}
    assert config["benchmark"] == "mcq" and config["generation"]["max_tokens"] == 1024
    assert canary_in(tmp_path) == []
