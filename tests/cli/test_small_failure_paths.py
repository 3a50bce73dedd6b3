"""The small failure paths: a dry run needs no key and writes nothing, looking at a cache does not
create one (a missing judge key: test_failure_paths)."""

from __future__ import annotations

import os

from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

NO_KEYS = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}


def test_a_dry_run_needs_no_key_and_writes_nothing(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 5, seed=1)
    for model in ("anthropic/claude-sonnet-4-5", "openai/gpt-4o", "google/gemini-2.5-flash"):
        done = run_main(["run", "mcq", "--model", model, "--data", str(data), "--dry-run", "--no-progress",
                        "--cache-dir", str(tmp_path / "cache")], env=NO_KEYS, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "5" in done.stdout
    assert sorted(os.listdir(tmp_path)) == ["ds"]  # no cache, no runs/


def test_cache_stats_on_no_cache_creates_none(tmp_path):
    for action in ("stats", "clear", "verify"):
        done = run_main(["cache", action, "--cache-dir", str(tmp_path / "nothing")])
        assert done.returncode == 0 and not (tmp_path / "nothing").exists(), done.stdout + done.stderr
