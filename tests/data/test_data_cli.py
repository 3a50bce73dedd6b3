"""The data a command reads, from the command line: no source reachable is one line in seconds; a run
directory an earlier release made on the bundled sample continues on the sample for free; an earlier
run on the sample is named when the benchmark itself cannot be read."""

from __future__ import annotations

import json
import socket
import time

import pytest
from cli_under_test import run_cli

from evalkit import run
from evalkit.cli import main
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_hub(tmp_path):
    """An environment whose Hub refuses connections and whose caches are empty."""
    return {"HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "HF_HOME": str(tmp_path / "hf"),
            "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"), "EVALKIT_DATA_CACHE": str(tmp_path / "ed"),
            "EVALKIT_GITHUB_API": f"http://127.0.0.1:{closed_port()}", "HF_HUB_OFFLINE": ""}


def test_no_data_and_no_hub_is_one_line_within_seconds(tmp_path, no_hub, monkeypatch, capsys):
    for name, value in no_hub.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()  # in-process: the command's own time, not an interpreter's start on a busy machine
    code = main(["run", "tdbench", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9", "--no-progress"])
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "cannot reach" in lines[0] and "hf://Columbia-ICSL/TDBench" in lines[0]
    assert "--data PATH" in lines[0] and "--data sample" in lines[0]
    assert out == "" and not (tmp_path / "runs").exists()  # no score, no folder
    assert elapsed < 10  # the behaviour under test: the probe answers in seconds, not after ~23 s of retries


def _sample_run_as_02(tmp_path, sim_url: str) -> tuple:
    """A tdbench run on the bundled sample, its config.json rewritten as 0.2 wrote it (the sample's path
    in the install it ran from, no data_source)."""
    res = run("tdbench", "vllm/sim-model", data="sample", limit=3, base_url=sim_url, progress=False, plots=False,
              cache_dir=str(tmp_path / "cache"))
    config_file = res.out_dir / "config.json"
    saved = json.loads(config_file.read_text())
    saved["config"]["data"] = "/opt/old-install/lib/python3.11/site-packages/evalkit/datasets/tdbench"
    saved["config"].pop("data_source")
    config_file.write_text(json.dumps(saved))
    return res, saved


def test_an_earlier_run_on_the_sample_continues_on_the_sample_for_free(tmp_path, monkeypatch, no_hub):
    monkeypatch.chdir(tmp_path)
    key = answer_key_for("tdbench", {"data": "sample", "limit": 3})
    with SimThread(SimConfig(answer_key=key)) as sim:
        first, _ = _sample_run_as_02(tmp_path, sim.url)
        asked = sim.counters.snapshot()["requests"]
        done = run_cli(["run", "tdbench", "--model", "vllm/sim-model", "--base-url", sim.url, "--limit", "3",
                        "--out", str(first.out_dir), "--cache-dir", "cache", "--no-progress"], env=no_hub, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert sim.counters.snapshot()["requests"] == asked  # 0 requests
        assert done.stderr.splitlines()[0] == "evalkit: the bundled sample (3 items), not the benchmark"
        missing = run_cli(["run", "tdbench", "--model", "vllm/sim-model", "--base-url", sim.url, "--limit", "3",
                           "--cache-dir", "cache", "--no-progress"], env=no_hub, cwd=tmp_path)
    assert missing.returncode == 2
    line = missing.stderr.strip()
    assert "cannot reach" in line and str(first.out_dir) in line and "`--data sample` continues it" in line
    summary = json.loads((first.out_dir / "summary.json").read_text())
    assert summary["data_source"]["kind"] == "sample"
