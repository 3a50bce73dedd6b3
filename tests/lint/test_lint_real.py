"""`evalkit lint` on the real RGB-Th-Bench release (skipped where the shared data is absent): the
question asked twice with opposite golds is an error, the one asked twice with the same gold a
warning, and the command exits 1."""

from __future__ import annotations

from cli_under_test import run_main

from evalkit.lint.engine import lint_data

CONTRADICTORY = ("Source 1/Fuse panel 2/b09/q1", "Source 1/Fuse panel 2/b09/q3")
CONSISTENT = ("Source 2/3/b14/q1", "Source 2/3/b14/q2")


def test_real_release_duplicates(shared_data, tmp_path):
    data = shared_data / "rgb-th-bench"
    report, _ = lint_data("rgb-th-bench", data, None, options={"skills": "all"})
    dups = {f.items: f for f in report.findings if f.kind == "duplicate-question"}
    assert set(dups) == {CONTRADICTORY, CONSISTENT}
    error, warning = dups[CONTRADICTORY], dups[CONSISTENT]
    assert error.severity == "error" and error.file == "Source 1/Fuse panel 2/questions.json"
    assert error.where == "Source 1/Fuse panel 2, block 9" and "different gold answers (Yes / No)" in error.message
    assert warning.severity == "warning" and warning.where == "Source 2/3, block 14"
    assert [f for f in report.findings if f.severity == "error"] == [error]  # the release is otherwise sound
    assert report.n_items == 1856 and report.n_images == 58

    proc = run_main(["lint", "rgb-th-bench", "--data", str(data), "--cache-dir", str(tmp_path / "cache")])
    assert proc.returncode == 1, proc.stderr
    assert "duplicate-question  Source 1/Fuse panel 2/questions.json, Source 1/Fuse panel 2, block 9" in proc.stdout
    assert "Source 2/3/questions.json, Source 2/3, block 14" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("lint rgb-th-bench: 1 error, 1 warning, ")
    again = run_main(["lint", "rgb-th-bench", "--data", str(data), "--cache-dir", str(tmp_path / "cache")])
    assert again.returncode == 1 and "data unchanged" in again.stdout  # the kept full result
