"""Which data a run read is said on the console and at the top of report.md for every source, not only
for the bundled sample: a Hub source at its commit, a local path with the sha256 of its content."""

from __future__ import annotations

import hashlib
import json
import shutil

from cli_under_test import run_cli

from evalkit.core.resources import dataset_path
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

TD = "Columbia-ICSL/TDBench"
ROT = [f"tdbench_rot{r}.tsv" for r in (0, 90, 180, 270)]


def registry_text() -> str:
    """TDBench's official source on the stand-in, the four rotation files with their md5s."""
    lines = ['[[source]]', 'bench = "tdbench"', 'name = "tdbench"', 'kind = "hub"', f'repo = "{TD}"',
             'revision = "main"', 'read = "2026-11-26"', 'layout = "test"', 'checksums = "md5"']
    for name in ROT:
        md5 = hashlib.md5(dataset_path("tdbench", name).read_bytes()).hexdigest()
        lines += ["[[source.files]]", f'path = "{name}"', f'md5 = "{md5}"', 'when = { td_set = ["all", "main"] }']
    return "\n".join(lines) + "\n"


def report_top(run_dir) -> str:
    return (run_dir / "report.md").read_text(encoding="utf-8").splitlines()[0]


def test_an_official_hub_source_is_named_at_its_commit_on_the_console_and_in_the_report(hub, tmp_path):
    commit = hub.add_commit(TD, {n: dataset_path("tdbench", n).read_bytes() for n in ROT}, lfs=ROT)
    (tmp_path / "registry.toml").write_text(registry_text())
    env = {"EVALKIT_REGISTRY": str(tmp_path / "registry.toml")}
    key = answer_key_for("tdbench", {"data": str(dataset_path("tdbench")), "td_set": "main", "limit": 3})
    with SimThread(SimConfig(answer_key=key)) as sim:
        done = run_cli(["run", "tdbench", "--model", "vllm/sim-model", "--base-url", sim.url, "--td-set", "main",
                        "--limit", "3", "--cache-dir", "cache", "--out", "run", "--no-progress"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    named = f"hf://{TD}@{commit} (3 items)"
    assert f"data: {named}" in done.stdout.splitlines()  # with the results, before the run directory
    assert report_top(tmp_path / "run") == f"**Data: {named}.**"
    again = run_cli(["report", "run"], cwd=tmp_path, env=env)  # the report made again says it too
    assert again.returncode == 0, again.stderr
    assert f"data: {named}" in again.stdout.splitlines()
    assert report_top(tmp_path / "run") == f"**Data: {named}.**"


def test_a_local_path_is_named_with_the_sha256_of_its_content(tmp_path):
    data = tmp_path / "my data" / "mcq.tsv"
    data.parent.mkdir()
    shutil.copy(dataset_path("demo", "mcq.tsv"), data)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        done = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                        "--cache-dir", "cache", "--out", "run", "--no-progress"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    sha = config["identity"]["data_sha256"]  # the content fingerprint the run is identified by
    items = json.loads((tmp_path / "run" / "summary.json").read_text())["n_items"]
    named = f"{data}, content sha256 {sha} ({items:,} items)"
    assert f"data: {named}" in done.stdout.splitlines()
    assert report_top(tmp_path / "run") == f"**Data: {named}.**"
