"""A single run's report.md: official table first, then counts, parser modes, cost and cache, plots."""

from __future__ import annotations

import json
import re

import numpy as np
from PIL import Image

from evalkit.engine.evaluate import run
from evalkit.engine.rereport import rereport
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

SECTIONS = ["## Official metrics", "## Counts", "## Parsing", "## Cost and cache", "## Plots", "## Settings"]


def _linked_plots(run_dir):
    text = (run_dir / "report.md").read_text(encoding="utf-8")
    return text, re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)


def test_mme_run_report_sections_disagreements_and_plots(tmp_path):
    key = answer_key_for("mme-realworld", {"data": "sample"})
    params = SimParams(theta=0.7, r=0.95, g=0.2, seed=5, style="verbose")
    with SimThread(SimConfig(answer_key=key, params=params)) as sim:
        result = run("mme-realworld", "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / "run"),
                     cache_dir=str(tmp_path / "cache"), progress=False)
    s = result.summary
    # verbose prose: the official parser takes the first capital A-E ("After ..."), the robust one the option
    modes = s["parser_modes"]
    assert modes["mode"] == "official" and modes["other_mode"] == "robust"
    assert modes["compared"] == s["n_queries"] and modes["verdicts_differ"] > 0
    assert modes["answers_differ"] >= modes["verdicts_differ"]
    h = s["headline"]
    assert h["metric"] == "Avg" and h["value"] == s["metrics"]["Avg"] and h["ci95"][0] <= h["value"] <= h["ci95"][1]
    text, linked = _linked_plots(result.out_dir)
    assert [text.index(x) for x in SECTIONS] == sorted(text.index(x) for x in SECTIONS)
    assert f"**{modes['verdicts_differ']}** verdicts change" in text
    assert f"| cache misses | {s['cache']['misses']} |" in text
    drawn = sorted(p.name for p in (result.out_dir / "plots").glob("*.png"))
    assert sorted(p.split("/")[-1] for p in linked) == drawn
    assert {"categories.png", "confusion.png", "e_rate.png"} <= set(drawn)
    # one run: its category bars, not a one-bar chart or a one-row heatmap repeating them
    assert not {"headline.png", "skills_heatmap.png"} & set(drawn)
    for rel in linked:
        with Image.open(result.out_dir / rel) as im:
            assert im.width >= 400 and im.height >= 300
            assert np.asarray(im.convert("L"), dtype=float).std() > 5


def test_rereport_rebuilds_report_and_plots(tmp_path):
    key = answer_key_for("mcq", {"circular": True})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.6, r=0.9, g=0.3, seed=2))) as sim:
        result = run("mcq", "vllm/sim-model", base_url=sim.url, circular=True, out=str(tmp_path / "run"),
                     cache_dir=str(tmp_path / "cache"), progress=False)
    for png in (result.out_dir / "plots").glob("*.png"):
        png.unlink()
    (result.out_dir / "report.md").unlink()
    import asyncio

    summary = asyncio.run(rereport(result.out_dir))
    assert summary["headline"] == json.loads(json.dumps(result.summary["headline"]))
    text, linked = _linked_plots(result.out_dir)
    assert "## Reliability over variant groups" in text
    assert {"plots/variants.png", "plots/reliability.png"} <= set(linked)
    assert all((result.out_dir / rel).exists() for rel in linked)


def test_no_plots_writes_the_report_without_figures(tmp_path):
    key = answer_key_for("mcq", {})
    with SimThread(SimConfig(answer_key=key)) as sim:
        result = run("mcq", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "run"),
                     cache_dir=str(tmp_path / "cache"), progress=False, plots=False)
    text, linked = _linked_plots(result.out_dir)
    assert result.exit_code == 0 and "## Official metrics" in text
    assert linked == [] and "## Plots" not in text and not (result.out_dir / "plots").exists()
    assert result.summary["headline"]["value"] == result.summary["metrics"]["accuracy"]
