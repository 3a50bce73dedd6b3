"""Provenance: the snapshot that answered (per distinct value), the servers, the software — in
manifest.json, summary.json and the report — and `compare` saying when one model's snapshots differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.multi.compare import compare
from evalkit.rundir.provenance import git_commit
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

ENV = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "GEMINI_API_KEY": "g-test"}
N = 5


def _run(model: str, data: Path, sim: SimThread, out: Path, cache: Path):
    url = sim.url + "/v1" if model.split("/")[0] in ("openai", "vllm") else sim.url
    return run("mcq", model, data=str(data), base_url=url, env=ENV, out=str(out), progress=False,
               cache_dir=str(cache), plots=False)


@pytest.mark.parametrize(("model", "named"), [
    ("openai/sim-model", "sim-model-2026-11-01 · fp_4f2a"),
    ("anthropic/sim-model", "sim-model-2026-11-01"),
    ("google/sim-model", "sim-model-2026-11-01"),
])
def test_the_snapshot_each_reply_names_is_counted_and_kept(model, named, tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=2)
    config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), snapshot="sim-model-2026-11-01",
                       system_fingerprint="fp_4f2a")
    with SimThread(config) as sim:
        res = _run(model, data, sim, tmp_path / "run", tmp_path / "cache")
        cached = _run(model, data, sim, tmp_path / "again", tmp_path / "cache")  # from the cache: same snapshot
    assert res.exit_code == 0 and res.summary["provenance"]["served_by"] == {named: N}
    assert cached.summary["provenance"]["served_by"] == {named: N}
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert {r["served_by"] for r in records} == {named}
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["served_by"] == {named: N} and manifest["evalkit"] == res.summary["evalkit_version"]
    assert {"aiohttp", "pillow"} <= set(manifest["sdks"]) and manifest["python"].count(".") == 2
    assert manifest["data_sha256"] and manifest["git_commit"] == git_commit()
    assert f"Answered by: `{named}` ({N})" in (tmp_path / "run" / "report.md").read_text()


def test_a_vllm_servers_version_and_models_are_in_the_manifest(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=2)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        _run("vllm/sim-model", data, sim, tmp_path / "run", tmp_path / "cache")
    servers = json.loads((tmp_path / "run" / "manifest.json").read_text())["servers"]
    (info,) = servers.values()
    assert info["served_models"] == ["sim-model"] and info["version"].startswith("evalkit-sim ")


def test_compare_says_when_one_models_snapshots_differ(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=2)
    key = answer_key_for("mcq", {"data": str(data)})
    outs = []
    for i, fp in enumerate(("fp_aaa", "fp_bbb")):
        with SimThread(SimConfig(answer_key=key, system_fingerprint=fp)) as sim:
            outs.append(tmp_path / f"run{i}")
            assert _run("openai/sim-model", data, sim, outs[-1], tmp_path / f"cache{i}").exit_code == 0
    notes = compare(outs, n_boot=0).notes
    assert any("openai/sim-model was answered by different snapshots" in n and "fp_aaa" in n and "fp_bbb" in n
               for n in notes), notes
