"""Visual regression: every plot of a sample run, read back as pixels.

The runs are the bundled IF-Bench sample (4 options, circular shifts x 2 languages, 10 dimensions)
and MME-RealWorld sample (5 options, the E trap), answered by deterministic fake models; their
chance is what summary.json says (grade.chance_pct over the queries). Each PNG must be big enough,
not blank, and carry its chance lines where its metadata says, which is checked against the axes'
own frame found in the pixels: on a 0-100 axis the 25% line lies a quarter of the way up.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.benchmarks.prepare import prepare
from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.grading.grade import chance_pct
from evalkit.metrics.analysis.result import ModelResult, analyze
from evalkit.report import figures
from evalkit.report.plots_common import CHANCE_COLOR, CHANCE_KEY

CHANCE_RGB = np.array([int(CHANCE_COLOR[i:i + 2], 16) for i in (1, 3, 5)])
NO_CHANCE_LINE = {"confusion.png", "e_rate.png"}  # counts and E shares: not accuracies


def fake_answers(queries: Sequence[Query], model: str, skill: float) -> list[Record]:
    """A model that knows an item (all its variants) with probability `skill`, else guesses among the
    options, or writes the extractor's "no option" token F now and then."""
    out = []
    for q in queries:
        knows = random.Random(f"{model}|{q.base_id}").random() < skill
        rng = random.Random(f"{model}|{q.id}")
        parsed = q.gold if knows else rng.choice([*q.options, "F"])
        out.append(Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant=dict(q.variant),
                          model=model, request_key="k" + q.id, response=f"Answer: {parsed}", gold=q.gold,
                          parsed=parsed, parse_method="rule", correct=parsed == q.gold, category=q.category))
    return out


def sample_results(bench_name: str, models: dict[str, float]) -> list[ModelResult]:
    prepared = prepare(bench_name, {"data": "sample"})
    chance = chance_pct(prepared.queries)
    return [analyze(label, prepared.bench, fake_answers(prepared.queries, label, skill), {}, n_boot=200,
                    category_boot=200, chance=chance) for label, skill in models.items()]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    root = tmp_path_factory.mktemp("pixels")
    two = sample_results("if-bench", {"sim/strong-model": 0.7, "sim/weak-model": 0.3})
    mme = sample_results("mme-realworld", {"sim/a": 0.6, "sim/b": 0.4})
    mixed = [two[0], dataclasses.replace(two[1], chance=20.0)]  # two option counts: two chance lines
    runs = {"one": two[:1], "two": two, "mme": mme, "mixed": mixed}
    return {name: {p.name: p for _, p in figures.draw_all(root / name, res, skip_unchanged=False)}
            for name, res in runs.items()}


def pixels(path: Path) -> tuple[np.ndarray, list[dict]]:
    with Image.open(path) as img:
        assert img.format == "PNG"
        lines = json.loads(img.info[CHANCE_KEY]) if CHANCE_KEY in img.info else []
        return np.asarray(img.convert("RGB")).astype(int), lines


def chance_mask(rgb: np.ndarray) -> np.ndarray:
    return np.abs(rgb - CHANCE_RGB).max(axis=2) <= 30


def frame(rgb: np.ndarray, line: dict) -> tuple[int, int]:
    """The two axis spines across the line's span (bottom/top rows, or left/right columns): the
    longest runs of near-black pixels. On a 0..top axis they mark 0 and top."""
    lo, hi = (int(round(v)) for v in line["span"])
    dark = (rgb.max(axis=2) < 80)
    if line["orientation"] == "h":
        share = dark[:, lo + 1:hi - 1].mean(axis=1)
    else:
        share = dark[lo + 1:hi - 1, :].mean(axis=0)
    edges = np.flatnonzero(share > 0.9)
    assert len(edges) >= 2, "no axis frame found"
    if line["orientation"] == "h":
        return int(edges.max()), int(edges.min())  # rows grow downwards: 0 is the bottom spine
    return int(edges.min()), int(edges.max())


def line_share(mask: np.ndarray, line: dict, at: int) -> float:
    lo, hi = (int(round(v)) for v in line["span"])
    band = mask[at - 1:at + 2, lo:hi] if line["orientation"] == "h" else mask[lo:hi, at - 1:at + 2].T
    return float(band.any(axis=0).mean())


EXPECTED = {
    ("one", "categories.png"), ("one", "variants.png"), ("one", "confusion.png"), ("one", "reliability.png"),
    ("two", "headline.png"), ("two", "skills_heatmap.png"), ("two", "categories.png"), ("two", "variants.png"),
    ("two", "confusion.png"), ("two", "reliability.png"), ("mme", "e_rate.png"), ("mme", "headline.png"),
    ("mixed", "categories.png"), ("mixed", "skills_heatmap.png"),
}


def test_every_expected_plot_is_drawn(drawn: dict[str, dict[str, Path]]) -> None:
    have = {(run, name) for run, files in drawn.items() for name in files}
    assert have >= EXPECTED
    assert "headline.png" not in drawn["one"] and "skills_heatmap.png" not in drawn["one"]


@pytest.mark.parametrize(("run", "name"), sorted(EXPECTED))
def test_plot_is_a_real_picture(drawn: dict[str, dict[str, Path]], run: str, name: str) -> None:
    rgb, _ = pixels(drawn[run][name])
    height, width, _ = rgb.shape
    assert 600 <= width <= 4000 and 400 <= height <= 3000, (width, height)
    assert rgb.std() > 10
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    values, counts = np.unique(packed, return_counts=True)
    assert len(values) > 20, "a handful of colours: nothing drawn"
    assert 1 - counts.max() / packed.size > 0.05, "almost every pixel has the background colour"


@pytest.mark.parametrize(("run", "name"), sorted(EXPECTED))
def test_chance_line_is_where_the_axis_says(drawn: dict[str, dict[str, Path]], run: str, name: str) -> None:
    rgb, lines = pixels(drawn[run][name])
    mask = chance_mask(rgb)
    if name in NO_CHANCE_LINE:
        assert lines == [] and mask.sum() < 20
        return
    want = {"mixed": {"chance 20%: sim/weak-model", "chance 25%: sim/strong-model"}}.get(run, {"chance 25%"})
    if name == "reliability.png":
        want = {"chance 0.25"}
    if name == "headline.png":  # IF-Bench's Avg: the share of shifts right, so the per-answer chance
        want = {"chance 25%"} if run == "two" else {"chance 20%"}
    assert {ln["label"] for ln in lines} == want
    for line in lines:
        value = float(line["label"].split()[1].rstrip("%:"))
        zero, top = frame(rgb, line)
        axis_top = 1.05 if name == "reliability.png" else 100.0
        expected = zero + (top - zero) * value / axis_top
        assert abs(line["at"] - expected) <= 2.0, (line, zero, top)
        assert line_share(mask, line, int(round(line["at"]))) > 0.4  # the dashes are there
    # and nowhere else: every row (column) mostly of the chance colour is one of the recorded lines
    horizontal = all(ln["orientation"] == "h" for ln in lines)
    for line in lines:
        lo, hi = (int(round(v)) for v in line["span"])
        runs = mask[:, lo:hi].mean(axis=1) if horizontal else mask[lo:hi, :].mean(axis=0)
        for pos in np.flatnonzero(runs > 0.3):
            assert min(abs(pos - ln["at"]) for ln in lines) <= 2.5, (pos, lines)


def test_single_run_shows_its_headline_in_the_category_chart(drawn: dict[str, dict[str, Path]]) -> None:
    """One model: no one-bar chart, but its overall number as a solid dark line among the category bars."""
    rgb, lines = pixels(drawn["one"]["categories.png"])
    (line,) = lines
    lo, hi = (int(round(v)) for v in line["span"])
    zero, top = frame(rgb, line)
    dark = (rgb[:, lo:hi].max(axis=2) < 120).mean(axis=1)
    rows = [y for y in np.flatnonzero(dark > 0.8) if top + 3 < y < zero - 3]  # not the spines
    assert rows, "no solid line across the axes"
    (strong,) = sample_results("if-bench", {"sim/strong-model": 0.7})
    assert strong.ci is not None and strong.per_answer_headline
    assert abs(np.mean(rows) - (zero + (top - zero) * strong.ci.estimate / 100)) <= 2.5
