"""An image that cannot be read is a data error, not a failed request (issue 31 item 13).

A TSV row whose `image` cell is not base64 (MME-RealWorld's TSV form) was recorded as a failed
query, scored as wrong, and the run exited 1 with "re-run the same command to ask the failed queries
again", which a re-run cannot do. Now the other items are answered and scored; the item is counted
apart (`counts.data_errors`, summary `data_errors`) and scored nowhere; the run ends with one line
naming the items and the fix, exit 2; a re-run says the same and sends nothing; once the image is
repaired, a re-run (--reask-changed: the file changed) asks that item alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import REPO

from evalkit.cli import main
from evalkit.sim.server import SimConfig, SimThread

SAMPLE = REPO / "datasets" / "mme-realworld" / "MME_RealWorld.tsv"
BAD_ROW = 33  # the last row: no other row refers to its image


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, str]:
    """The bundled MME-RealWorld TSV with one row's image replaced by text; (file, the good row)."""
    lines = SAMPLE.read_text(encoding="utf-8").split("\n")
    good = lines[BAD_ROW]
    cells = good.split("\t")
    cells[1] = "not an image, not base64: " + "#" * 400
    lines[BAD_ROW] = "\t".join(cells)
    path = tmp_path / "MME_RealWorld.tsv"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path, good


def _run(data: Path, tmp_path: Path, url: str, *more: str) -> int:
    return main(["run", "mme-realworld", "--model", "vllm/sim-model", "--base-url", url, "--data", str(data),
                 "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                 "--no-plots", "--concurrency", "4", *more])


def test_the_item_is_a_data_error_and_the_rest_is_scored(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "k")
    path, good = data
    bad_id = good.split("\t")[0]
    with SimThread(SimConfig()) as sim:
        first = _run(path, tmp_path, sim.url)
        sent_first = sim.counters.snapshot()["requests"]
        out1 = capsys.readouterr()
        second = _run(path, tmp_path, sim.url)
        sent_second = sim.counters.snapshot()["requests"]
        out2 = capsys.readouterr()
        lines = path.read_text(encoding="utf-8").split("\n")
        lines[BAD_ROW] = good  # the image repaired
        path.write_text("\n".join(lines), encoding="utf-8")
        third = _run(path, tmp_path, sim.url, "--reask-changed")  # (the data file changed)
        sent_third = sim.counters.snapshot()["requests"]
        out3 = capsys.readouterr()

    n = 33
    assert (first, second) == (2, 2)
    assert sent_first == n - 1 and sent_second == sent_first  # the re-run sends nothing
    for out in (out1, out2):
        text = out.out + out.err
        assert "Traceback" not in text
        assert "re-run the same command" not in text and "failed" not in text
        said = "".join(text.split())  # rich wraps the closing line at the console's width, even inside a path
        for expected in (f"1 item not asked, its image cannot be read: {bad_id} (first: cannot read image",
                         f"`evalkit lint mme-realworld --data {path}` lists every broken image; repair or drop it"):
            assert "".join(expected.split()) in said

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert third == 0, out3.err[-3000:] + out3.out[-2000:]
    assert third == 0 and sent_third == sent_second + 1  # repaired: that item alone is asked
    assert summary["complete"] and "data_errors" not in summary and summary["counts"]["errors"] == 0
    assert len(records) == n and all(r["error"] is None for r in records)


def test_the_summary_keeps_the_data_error_apart(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VLLM_API_KEY", "k")
    path, good = data
    bad_id = good.split("\t")[0]
    with SimThread(SimConfig()) as sim:
        assert _run(path, tmp_path, sim.url) == 2
    capsys.readouterr()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    (bad,) = [r for r in records if r["error"] is not None]
    assert bad["item_id"] == bad_id and bad["error"] == "data" and "cannot read image" in bad["error_message"]
    counts = summary["counts"]
    assert counts["errors"] == 0 and counts["data_errors"] == 1
    assert counts["correct"] + counts["wrong"] + counts["unparsed"] + counts["refusals"] == 32
    assert summary["failures"] is None and summary["metrics_answered"] is None  # nothing failed
    assert summary["data_errors"]["items"] == [bad_id] and summary["data_errors"]["queries"] == 1
    assert summary["complete"] is False and summary["missing"] == 0
    assert bad["query_id"] in summary["unscored_ids"]
    assert summary["headline"]["n_units"] == 32  # scored over the 32 answered items, not 33
    report = (tmp_path / "run" / "report.md").read_text()
    assert "1 item not asked: its image cannot be read" in report and "failed" not in report


def test_if_bench_skips_them_under_skip_missing(tmp_path, capsys, monkeypatch):
    import shutil

    monkeypatch.setenv("VLLM_API_KEY", "k")
    data = tmp_path / "if-bench"
    shutil.copytree(SAMPLE.parents[1] / "if-bench", data)
    (data / "infrared_imgs" / "ir_001.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00 truncated" * 20)
    argv = ["run", "if-bench", "--model", "vllm/sim-model", "--data", str(data), "--lang", "en",
            "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--no-plots"]
    with SimThread(SimConfig()) as sim:
        plain = main([*argv, "--base-url", sim.url, "--out", str(tmp_path / "plain")])
        said = "".join(capsys.readouterr().out.split())
        skipping = main([*argv, "--base-url", sim.url, "--out", str(tmp_path / "skip"), "--skip-missing"])
    assert plain == 2 and "repairordropthem,oradd--skip-missingtoleavesuchitemsout" in said
    assert skipping == 0
    summary = json.loads((tmp_path / "skip" / "summary.json").read_text())
    assert summary["complete"] and summary["data_errors"]["skipped"] is True
    assert len(summary["data_errors"]["items"]) == 2  # the two items showing that picture, 4 shifts each
    assert summary["counts"]["data_errors"] == 8 and summary["counts"]["errors"] == 0
