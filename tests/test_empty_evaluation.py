"""An evaluation of nothing is an error (one line, exit 2), not a report of 0.00 on 0 items."""

from __future__ import annotations

import json

from cli_under_test import run_cli
from conftest import REPO


def test_an_empty_data_file_is_one_line_and_exit_2(tmp_path):
    data = tmp_path / "empty.jsonl"
    data.write_text("")
    done = run_cli(["run", "mcq", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9", "--data", str(data),
                    "--out", str(tmp_path / "run"), "--no-progress", "--cache-dir", str(tmp_path / "c")])
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err and "Traceback" not in err, err
    assert "nothing to evaluate: it holds no items" in err and not (tmp_path / "run").exists()


def test_if_bench_with_every_image_missing_is_one_line_and_exit_2(tmp_path):
    sample = json.loads((REPO / "datasets" / "if-bench" / "if_bench_sample.json").read_text())
    data = tmp_path / "if_bench.json"
    data.write_text(json.dumps(sample))  # its images are not beside it: every one is missing
    done = run_cli(["run", "if-bench", "--model", "vllm/sim-model", "--base-url", "http://127.0.0.1:9",
                    "--data", str(data), "--skip-missing", "--out", str(tmp_path / "run"), "--no-progress",
                    "--cache-dir", str(tmp_path / "c")])
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err, err
    assert "nothing to evaluate: all" in err and "were skipped (image files missing)" in err
    assert not (tmp_path / "run").exists()
