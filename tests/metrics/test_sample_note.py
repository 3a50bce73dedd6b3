"""How a sample is named wherever it is shown (metrics/analysis/sample_note.py): the words, from the block."""

from __future__ import annotations

from evalkit.metrics.analysis.sample_note import estimate_note, sample_of, sample_tag, shown_tables

TABLES = [{"title": "A", "head": ["model", "x"], "rows": [["m", 1.0]], "note": "mean over items"},
          {"title": "B", "head": ["model", "θ"], "rows": [["m", 0.5]], "whole_set": "it solves per category"}]


def test_a_whole_run_shows_its_tables_as_they_are():
    summary = {"tables": TABLES}
    assert sample_of(summary) is None and shown_tables(summary) == TABLES
    assert sample_of({"sample": None, "tables": TABLES}) is None


def test_a_sample_marks_kept_tables_and_leaves_out_the_others():
    block = {"items": 412, "of": 2000, "half_width": 0.0291, "scale": 1.0}  # a fraction's headline: ±2.9 points
    summary = {"tables": TABLES, "sample": block}
    kept, left = shown_tables(summary)
    assert kept["note"] == "estimate from 412 of 2,000 items, ±2.9 points (the headline's 95 % interval); mean over items"
    assert left == {"title": "B", "console": None,
                    "left_out": "B: left out, this run is a sample of 412 of 2,000 items and it solves per category"}
    assert shown_tables(summary, marked=False)[0] == TABLES[0]
    assert sample_tag(block) == "sample 412/2,000 ±2.9"


def test_a_block_without_an_interval_says_how_many_items_only():
    block = {"rule": "until-decided", "items": 180, "of": 1000}
    assert sample_tag(block) == "sample 180/1,000" and estimate_note(block) == "estimate from 180 of 1,000 items"
