"""`evalkit report RUN` and `evalkit view RUN` on a run over a big local data file read the saved index the
run left in its cache folder (manifest.json records which), not the file: a re-report of a 35 GB
MME-RealWorld run reads the index, and its outputs are those of a re-report that reads the whole file.

Bytes read are the `rchar` of each child `evalkit` process (/proc/<pid>/io, read once it has exited and
before it is reaped): everything it read, its imports included. Self-contained (no helper of tests/):
the same file runs on 0.3.0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_under_test import run_counting_reads as evalkit
from synthetic_data import mme_tsv

from evalkit.sim.server import SimConfig, SimThread

pytestmark = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/<pid>/io")

CATEGORIES = [("Perception/OCR with Complex Context", "license"), ("Reasoning/Remote Sensing", "position")]


def outputs(run: Path) -> dict[str, object]:
    summary = json.loads((run / "summary.json").read_text())
    return {"summary": summary, "report.md": (run / "report.md").read_text(),
            "records": sorted((run / "records.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """One run over a ~50 MB base64 TSV, its cache folder named relative to where it ran."""
    root = tmp_path_factory.mktemp("rereport")
    data = root / "data" / "mme.tsv"
    size = mme_tsv(data, rows=60, image_bytes=620_000, categories=CATEGORIES)
    assert 40e6 < size < 60e6
    with SimThread(SimConfig()) as sim:
        code, err, _ = evalkit(["run", "mme-realworld", "--data", str(data), "--model", "vllm/sim-model",
                                "--base-url", sim.url, "--cache-dir", "cache", "--out", "run",
                                "--no-progress"], root)  # its plots drawn: a report finds them unchanged
    assert code == 0, err
    return root, size


def test_report_reads_the_index_not_the_data_and_reports_the_same(big_run):
    root, size = big_run
    elsewhere = root / "elsewhere"  # not where the run ran: its ./cache is not the run's cache folder
    elsewhere.mkdir(exist_ok=True)
    code, err, indexed = evalkit(["report", str(root / "run")], elsewhere)
    assert code == 0, err
    assert indexed < size / 4, f"evalkit report read {indexed:,} bytes for a {size:,}-byte data file"
    first = outputs(root / "run")
    code, err, unindexed = evalkit(["report", str(root / "run")], elsewhere, {"EVALKIT_DATA_INDEX": "0"})
    assert code == 0, err
    assert unindexed > size  # without the index the file is read whole
    assert outputs(root / "run") == first  # the same scores, report and records either way
    assert first["summary"]["n_queries"] == 60


def test_view_reads_the_index_not_the_data(big_run):
    root, size = big_run
    code, err, _ = evalkit(["view", str(root / "run"), "--out", str(root / "site1")], root)
    assert code == 0, err  # (the first site reads the run's images to make its thumbnails)
    code, err, again = evalkit(["view", str(root / "run"), "--out", str(root / "site1")], root / "data")
    assert code == 0, err
    assert again < size / 4, f"a second evalkit view read {again:,} bytes for a {size:,}-byte data file"
    pages = json.dumps(sorted(p.read_text() for p in (root / "site1").rglob("*.js") if "assets" not in p.parts))
    assert "Question 59?" in pages
