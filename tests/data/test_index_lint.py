"""`evalkit lint` on a big data file that a run has indexed: it reads the questions from the saved index
and each image once for its image checks (about the file once, not the file and then its images), and
a second lint of the unchanged file answers from its stored result after reading the index alone. The
cheap checks at the start of a run never re-read the file (tests/data/test_data_index.py: a second run
reads under a quarter of it). The findings are those of a lint without the index.

Bytes read are the `rchar` of each child `evalkit` process (/proc/<pid>/io). Self-contained: the same
file runs on 0.3.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_under_test import run_counting_reads
from synthetic_data import mme_tsv

from evalkit.sim.server import SimConfig, SimThread

pytestmark = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/<pid>/io")

def lint(cwd: Path, data: Path, cache: str, env: dict[str, str] | None = None) -> tuple[int, dict, int]:
    """`evalkit lint mme-realworld --json`: (exit code, the findings, bytes read)."""
    code, out, rchar = run_counting_reads(["lint", "mme-realworld", "--data", str(data), "--cache-dir", cache, "--json"],
                                          cwd, env, stdout=True)
    return code, json.loads(out), rchar


def findings(report: dict) -> list:
    return sorted(json.dumps(f, sort_keys=True) for f in report["findings"])


def test_lint_of_an_indexed_file_reads_it_once_then_not_at_all(tmp_path):
    data = tmp_path / "data" / "mme.tsv"
    size = mme_tsv(data, rows=50, image_bytes=700_000, categories=[("Perception/Monitoring", "Person/attribute/color")])
    assert 40e6 < size < 60e6
    with SimThread(SimConfig()) as sim:  # a run (on two questions) reads the file once and indexes it
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_")}
        done = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "mme-realworld", "--data", str(data),
                               "--model", "vllm/sim-model", "--base-url", sim.url, "--cache-dir", "cache",
                               "--limit", "2", "--no-progress", "--no-plots"], cwd=tmp_path, env=child_env,
                              capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    code, first, read_first = lint(tmp_path, data, "cache")
    assert code == 0, first
    # the image checks ran: they decode every image (plain colours: near duplicates among them)
    assert first["items"] == 50 and any(f["kind"] == "image-near-duplicate" for f in first["findings"]), first
    code, second, read_second = lint(tmp_path, data, "cache")
    assert code == 0
    assert read_second < size / 4, f"a second lint (its result stored) read {read_second:,} of {size:,} bytes"
    code, unindexed, read_unindexed = lint(tmp_path, data, "other-cache", {"EVALKIT_DATA_INDEX": "0"})
    assert code == 0
    assert read_unindexed > 2 * size  # without the index: the whole file, then its images again
    # with it: the index and every image once (the image checks decode them all), the file once less
    assert read_first < read_unindexed - 0.75 * size, f"the first lint read {read_first:,} bytes, {read_unindexed:,} " \
        f"without the index, of a {size:,}-byte file"
    assert findings(first) == findings(second) == findings(unindexed)
