"""`evalkit lint` on a generic multiple-choice TSV with planted faults, its exit codes and bad input,
and the cheap lint a run does at its start (lint.json, the reused full result)."""

from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import draw_image

from evalkit.benchmarks import get_benchmark
from evalkit.lint import lint_for_run
from evalkit.lint.engine import lint_data
from evalkit.lint.runs import LINT_JSON, read_lint

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange", "cyan", "white", "black", "grey"]


def _png_b64(seed: int) -> str:
    buf = io.BytesIO()
    draw_image(seed, 48).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _clean_rows(n: int = 12) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        opts = COLOURS[i % 7: i % 7 + 4]
        rows.append({"index": str(i), "image": _png_b64(i), "image_path": "", "question": f"Which colour is shape {i}?",
                     "A": opts[0], "B": opts[1], "C": opts[2], "D": opts[3], "answer": "ABCD"[i % 4],
                     "category": f"cat{i % 3}"})
    return rows


def _planted_rows(folder: Path) -> list[dict[str, str]]:
    """One row per planted fault (ids 100+); 103/104 are a contradictory duplicate."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "empty.png").write_bytes(b"")
    base = {"image_path": "", "category": "cat0", "A": "red", "B": "green", "C": "blue", "D": "cyan"}
    return [
        {**base, "index": "101", "image": _png_b64(101), "question": "Which is it (gold)?", "answer": "E"},
        {**base, "index": "102", "image": base64.b64encode(b"this is not a picture").decode(),
         "question": "Which is it (undecodable)?", "answer": "A"},
        {**base, "index": "103", "image": _png_b64(103), "question": "Which colour is  the ball?", "answer": "A"},
        {**base, "index": "104", "image": "103", "question": "Which colour is the ball?", "answer": "B"},
        {**base, "index": "105", "image": _png_b64(105), "question": "Which is it (dup options)?", "C": "red",
         "answer": "B"},
        {**base, "index": "106", "image": _png_b64(106), "question": "Which is it (empty option)?", "B": "",
         "answer": "A"},
        {**base, "index": "107", "image": "", "image_path": "empty.png", "question": "Which is it (zero bytes)?",
         "answer": "A"},
    ]


PLANTED = {"101": ("error", "gold-not-in-options"), "102": ("error", "image-unreadable"),
           "103": ("error", "duplicate-question"), "104": ("error", "duplicate-question"),
           "105": ("warning", "duplicate-option"), "106": ("warning", "empty-option"),
           "107": ("error", "image-empty")}


def write_tsv(folder: Path, rows: list[dict[str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "set.tsv"
    columns = ["index", "image", "image_path", "question", "A", "B", "C", "D", "answer", "category"]
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, columns, delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def test_planted_faults_are_each_named_and_no_clean_row_is(tmp_path):
    data = write_tsv(tmp_path / "set", _clean_rows() + _planted_rows(tmp_path / "set"))
    report, reused = lint_data("mcq", data, None)
    assert reused is None and report.checks == "full" and report.n_items == 19
    serious = [f for f in report.findings if f.severity in ("error", "warning")]
    for idx, (severity, kind) in PLANTED.items():
        hits = [f for f in serious if idx in f.items]
        assert [(f.severity, f.kind) for f in hits] == [(severity, kind)], (idx, hits)
        if kind == "image-empty":  # an image file is named by its own path, the rows by their ids
            assert hits[0].file == "empty.png", hits
        else:
            assert all(f.file == "set.tsv" and f.where and f.where.startswith("row") for f in hits), hits
    named = {i for f in serious for i in f.items}
    assert named == set(PLANTED), named - set(PLANTED)  # no clean row at error or warning level
    dup = next(f for f in serious if f.kind == "duplicate-question")
    assert dup.items == ("103", "104") and "red / green" in dup.message
    assert report.counts == {"error": 4, "warning": 2, "info": report.counts["info"]}
    balance = [f for f in report.findings if f.kind == "answer-balance"]
    assert balance and "chi-square" in balance[0].message and "n=18" in balance[0].message


def test_cli_exit_codes_and_json(tmp_path):
    bad = write_tsv(tmp_path / "bad", _clean_rows() + _planted_rows(tmp_path / "bad"))
    clean = write_tsv(tmp_path / "clean", _clean_rows())
    proc = run_main(["lint", "mcq", "--data", str(bad), "--no-cache"])
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert out.index("errors (4)") < out.index("warnings (2)") < out.rindex("lint mcq: 4 errors, 2 warnings")
    assert "gold-not-in-options  set.tsv, row 13: the gold answer 'E' is not among the options A, B, C, D" in out
    proc = run_main(["lint", "mcq", "--data", str(clean), "--no-cache", "--json"])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["counts"]["error"] == doc["counts"]["warning"] == 0 and doc["items"] == 12
    assert {f["kind"] for f in doc["findings"]} <= {"answer-balance", "image-near-duplicate"}


@pytest.mark.parametrize(("argv", "expected"), [
    (["lint", "no-such-bench", "--data", "."], "unknown benchmark 'no-such-bench'"),
    (["lint", "mcq", "--data", "/nonexistent/set.tsv"], "--data: no such file or directory: /nonexistent/set.tsv"),
])
def test_bad_input_is_exit_2_and_one_line(argv, expected):
    proc = run_main([*argv, "--no-cache"])
    assert proc.returncode == 2
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert expected in proc.stderr


def test_run_start_lint_cheap_then_reuses_the_full_result(tmp_path):
    # data a run accepts (the strict loader reads it) but with a contradictory duplicate and a zero-byte image
    rows = _clean_rows() + [r for r in _planted_rows(tmp_path / "set") if r["index"] in ("103", "104", "107")]
    data = write_tsv(tmp_path / "set", rows)
    bench = get_benchmark("mcq")
    items = bench.load(data, None, {})
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    run_dir.mkdir()
    summary = lint_for_run(bench, items, data, run_dir, cache)
    assert summary.report.checks == "cheap" and summary.reused is None
    assert summary.counts == {"error": 2, "warning": 0, "info": 0}
    assert {f.kind for f in summary.errors} == {"duplicate-question", "image-empty"}
    assert summary.line.startswith("lint: 2 errors (cheap checks") and summary.line.endswith("see lint.json")
    saved = read_lint(run_dir)
    assert saved is not None and saved["counts"]["error"] == 2 and len(saved["findings"]) == 2
    assert summary.to_summary()["file"] == LINT_JSON and len(summary.to_summary()["errors"]) == 2
    dup = next(e for e in summary.to_summary()["errors"] if e["kind"] == "duplicate-question")
    assert dup["items"] == ["103", "104"] and dup["categories"] == ["cat0"]

    full, _ = lint_data("mcq", data, None, cache_dir=cache)  # `evalkit lint` keeps its full result
    again = lint_for_run(bench, items, data, run_dir, cache)
    assert again.reused and again.report.checks == "full" and again.report.findings == full.findings
    assert lint_data("mcq", data, None, cache_dir=cache)[1] == again.reused  # the command reuses it too
    # --limit asks fewer items: another key, so the cheap checks again
    fewer = lint_for_run(bench, items[:5], data, run_dir, cache)
    assert fewer.report.checks == "cheap" and fewer.counts["error"] == 0
    # an edited data file (or image) is other data: the cheap checks again, never the stale result
    data.write_text(data.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert lint_for_run(bench, items, data, run_dir, cache).reused is None


def test_cheap_and_full_agree_on_everything_cheap_checks(tmp_path):
    rows = _clean_rows() + [r for r in _planted_rows(tmp_path / "set") if r["index"] in ("103", "104", "105", "107")]
    data = write_tsv(tmp_path / "set", rows)
    bench = get_benchmark("mcq")
    items = bench.load(data, None, {})
    cheap = lint_for_run(bench, items, data, tmp_path, None).report.findings
    full = lint_data("mcq", data, None)[0].findings
    from evalkit.lint.model import CHEAP_ONLY_SKIPS

    assert [f for f in full if f.kind not in CHEAP_ONLY_SKIPS] == list(cheap)
