"""`--batch` at the command line, before anything is sent: provider checks and the dry run's two costs."""

from __future__ import annotations

import os
import re

from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

NO_KEYS = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}


def test_batch_with_a_provider_without_a_batch_api_is_one_line_and_exit_2(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 3, seed=1)
    for model in ("vllm/sim-model", "openai-compatible/m"):
        done = run_main(["run", "mcq", "--model", model, "--data", str(data), "--batch", "--no-progress",
                        "--base-url", "http://127.0.0.1:9"], env=NO_KEYS, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        err = done.stderr.strip().splitlines()
        assert len(err) == 1 and "--batch" in err[0] and model.split("/")[0] + "/ has no batch API" in err[0]
    assert sorted(os.listdir(tmp_path)) == ["ds"]  # nothing written


def test_a_batch_dry_run_sends_nothing_and_shows_both_costs(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 5, seed=1)
    done = run_main(["run", "mcq", "--model", "openai/gpt-4o", "--data", str(data), "--dry-run", "--batch",
                    "--no-progress", "--cache-dir", str(tmp_path / "cache")], env=NO_KEYS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    live = re.search(r"cost \(est\.\), live │ \$([\d.]+) – \$([\d.]+)", out)
    batch = re.search(r"cost \(est\.\), --batch │ \$([\d.]+) – \$([\d.]+)", out)
    assert live and batch, out
    for lo_hi in (1, 2):
        assert float(batch.group(lo_hi)) == float(live.group(lo_hi)) / 2 or abs(
            float(batch.group(lo_hi)) - float(live.group(lo_hi)) / 2) < 1e-4
    assert sorted(os.listdir(tmp_path)) == ["ds"]


def test_batches_of_a_folder_that_is_no_run_directory_is_an_error(tmp_path):
    done = run_main(["batches", str(tmp_path)], env=NO_KEYS, cwd=tmp_path)
    assert done.returncode == 2 and "not a run directory" in done.stderr
    (tmp_path / "config.json").write_text("{}")
    done = run_main(["batches", str(tmp_path)], env=NO_KEYS, cwd=tmp_path)
    assert done.returncode == 0 and "no batches" in done.stdout


def test_batches_without_a_run_directory_looks_under_runs(tmp_path):
    done = run_main(["batches"], env=NO_KEYS, cwd=tmp_path)
    assert done.returncode == 0 and "no run directory with batches" in done.stdout
