"""Console tables and links at the width the output has (issue 35 item 5).

At 100 columns IF-Bench's Table 2 (11 numbers after the model) lost its last column; at 80 a model
name was cut to 12 characters with room to spare; the `file://` link `evalkit view` prints was broken
over two lines (rich breaks long lines at the console's width, 80 when the output is not a terminal).
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from evalkit.report.console import print_summary
from evalkit.view.command import cmd_view

IF_HEAD = ["model", "Avg", "SU", "IT", "VC", "TL", "SRU", "OC", "TFU", "AR", "TFR", "CR"]
RGBTH_HEAD = ["model", "RGB-Txt QAcc", "RGB-Txt SAcc", "RGB-Th-Txt QAcc", "RGB-Th-Txt SAcc", "Overall QAcc",
              "Overall SAcc"]
LONG = "anthropic/claude-sonnet-4-5-20250929"


def _summary(head: list[str], row: list, title: str, decimals: int | None = None) -> dict:
    table = {"title": title, "head": head, "rows": [row], "note": None, "console": True, "units": "%", "groups": []}
    if decimals is not None:
        table["decimals"] = decimals
    return {"benchmark": "b", "model": row[0], "mode": "official", "tables": [table], "metrics": {},
            "counts": {"correct": 1, "wrong": 0}, "n_queries": 1, "missing": 0}


def _printed(summary: dict, width: int, out_dir: str | None = None) -> list[str]:
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=width), out_dir)
    return out.getvalue().splitlines()


def _row(lines: list[str], start: str) -> str:
    """The table row whose label starts with `start`."""
    return next(line for line in lines if line.strip().startswith(start))


def test_if_bench_table_2_keeps_every_column_at_100_and_below():
    summary = _summary(IF_HEAD, ["openrouter/qwen/qwen2.5-vl-72b-instruct", *[100.0] * 11], "IF-Bench Table 2",
                       decimals=1)
    for width in (100, 80, 60):
        lines = _printed(summary, width)
        assert _row(lines, "model").split() == IF_HEAD, (width, lines)
        row = _row(lines, "openrouter/")
        assert row.split()[1:] == ["100.0"] * 11, (width, row)
        assert len(row.rstrip()) <= max(width, 80)  # narrower than the numbers: as wide as they need, no wider


def test_a_long_name_is_cut_only_as_much_as_the_width_needs():
    summary = _summary(RGBTH_HEAD, [LONG, 75.0, 33.33, 76.19, 42.86, 75.6, 38.1], "RGB-Th-Bench Table 3")
    at_80 = _row(_printed(summary, 80), "anthropic/")
    assert "anthropic/claude-sonnet…" in at_80 and len(at_80.rstrip()) <= 80  # 0.3.0.dev0: "anthropic/c…"
    at_100 = _row(_printed(summary, 100), "anthropic/")
    assert LONG in at_100 and at_100.split()[1:] == ["75.00", "33.33", "76.19", "42.86", "75.60", "38.10"]
    for width in (80, 100):
        heads = _printed(summary, width)
        assert _row(heads, "model").split() == ["model", "QAcc", "SAcc", "QAcc", "SAcc", "QAcc", "SAcc"]


def test_paths_and_the_view_link_stay_on_one_line(tmp_path, monkeypatch):
    deep = tmp_path / ("a-rather-long-folder-name-for-results" * 2) / "view"
    site = SimpleNamespace(index=deep / "index.html", questions=1624, models=["m1", "m2"], notes=[], out=deep,
                           thumbs=SimpleNamespace(made=3, reused=0, failed=0))
    monkeypatch.setattr("evalkit.view.site.build_site", lambda run_dirs, out: site)
    out = io.StringIO()
    args = argparse.Namespace(run_dirs=["r"], out=None, serve=False, port=8765)
    assert cmd_view(args, Console(file=out, width=80)) == 0
    lines = out.getvalue().splitlines()
    assert f"open {Path(site.index).resolve().as_uri()}" in lines
    assert any(line.startswith(f"wrote {site.index} (1,624 questions") for line in lines)
    summary = _summary(IF_HEAD, ["m", *[50.0] * 11], "IF-Bench Table 2", decimals=1)
    assert f"run directory: {deep}" in _printed(summary, 80, str(deep))
