"""A sampled run is never shown as the whole benchmark (issue 46, item 1's last sentence and item 3):
its paper tables say they are estimates ("estimate from N of M items, ±h points") or are left out with a
line saying why; `evalkit report RUN` and `evalkit view` keep the marks; `evalkit compare` marks its row.

Real `--until-ci` runs against the simulator: a multiple-choice set (every table kept and marked) and a
TDBench set (Table 3, the reliability and VLMEvalKit tables left out)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from synthetic_data import tiny_mcq_set, tiny_tdbench_set

import evalkit
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

ENV = {"OPENAI_API_KEY": "sk-test"}


def _cli(args: list[str], capsys) -> tuple[int, str]:
    """`evalkit ARGS` in this process: its exit code and what it printed."""
    from evalkit.cli import main

    capsys.readouterr()
    code = main(args)
    return code, capsys.readouterr().out


def _run(bench: str, data: Path, sim: SimThread, out: Path, **kw):
    return evalkit.run(bench, "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, out=str(out),
                       progress=False, cache_dir=str(out.parent / "cache"), plots=False, **kw)


def _mark(block: dict) -> str:
    h = block["half_width"] * 100 / block.get("scale", 100)
    return f"estimate from {block['items']:,} of {block['of']:,} items, ±{h:.1f} points"


def _sections(report: str) -> dict[str, str]:
    """report.md's "## title" sections, each with the text up to the next heading."""
    parts = re.split(r"^## ", report, flags=re.M)
    return {p.split("\n", 1)[0]: p.split("\n", 1)[1] if "\n" in p else "" for p in parts[1:]}


def test_a_sampled_mcq_run_marks_every_table_and_keeps_the_marks(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tiny_mcq_set(tmp_path / "ds", 300, 2)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.8, seed=1))) as sim:
        res = _run("mcq", data, sim, tmp_path / "sample", until_ci=25)
        block = res.summary["sample"]
        assert block["items"] < block["of"] == 300
        whole = _run("mcq", data, sim, tmp_path / "whole")
    mark = _mark(block)
    report = (tmp_path / "sample" / "report.md").read_text()
    sections = _sections(report)
    paper = [t["title"] for t in res.summary["tables"]]
    assert paper and all(mark in sections[title] for title in paper)  # every table is a mean over items: kept
    assert mark not in (tmp_path / "whole" / "report.md").read_text()

    # evalkit report RUN writes the report again from the records: the marks stay
    (tmp_path / "sample" / "report.md").unlink()
    code, out = _cli(["report", str(tmp_path / "sample")], capsys)
    assert code == 0, out
    again = _sections((tmp_path / "sample" / "report.md").read_text())
    assert all(mark in again[title] for title in paper)
    assert f"tables: {mark}" in out
    # the block replayed from the records is the run's own, and the run is still a sample
    after = json.loads((tmp_path / "sample" / "summary.json").read_text())
    assert after["sample"] == block and after["stopped"] == "sample"  # the console says it above its tables

    # the view: the tables' notes and the leaderboard's row
    index = evalkit.build_view([tmp_path / "sample", tmp_path / "whole"], out=tmp_path / "site")
    site = " ".join(p.read_text(errors="replace") for p in index.parent.rglob("*") if p.suffix in (".html", ".js",
                                                                                                    ".json"))
    tag = f"sample {block['items']:,}/300 ±{block['half_width']:.1f}"
    assert mark in site and tag in site

    # compare: the sampled run's row says so, the whole run's does not
    code, out = _cli(["compare", str(tmp_path / "sample"), str(tmp_path / "whole"), "--out", str(tmp_path / "cmp"),
                      "--n-boot", "200"], capsys)
    assert code in (0, 1), out
    rows = [line for line in (tmp_path / "cmp" / "report.md").read_text().splitlines() if line.startswith("| ")]
    sampled = [r for r in rows if tag in r]
    assert len(sampled) == 1 and whole.summary["n_queries"] == 300
    data_rows = [r for r in rows if "sim-model" in r]
    assert len(data_rows) >= 2 and sum(tag in r for r in data_rows) == 1


def test_a_sampled_tdbench_run_leaves_out_the_tables_that_need_every_item(tmp_path):
    data = tiny_tdbench_set(tmp_path / "ds", 240)
    key = answer_key_for("tdbench", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = _run("tdbench", data, sim, tmp_path / "run", until_ci=25)
    block = res.summary["sample"]
    assert block["items"] < block["of"]
    report = (tmp_path / "run" / "report.md").read_text()
    sections = _sections(report)
    titles = {t["title"]: t for t in res.summary["tables"]}
    left = [t for t in titles if t.startswith(("TDBench Table 3", "TDBench reliability", "TDBench as VLMEvalKit"))]
    kept = [t for t in titles if t not in left]
    assert "TDBench Table 3: RE, MA, VE and reliability" in left and "TDBench Table 2: VE@0° vs RE" in kept
    for title in left:  # a line saying why, no table
        assert title not in sections
        line = next(x for x in report.splitlines() if x.startswith(f"_{title}: left out"))
        assert f"a sample of {block['items']:,} of {block['of']:,} items" in line
    assert all(_mark(block) in sections[title] for title in kept)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["sample"] == block


def test_the_matrix_marks_each_sampled_row(tmp_path, capsys, monkeypatch):
    data = tiny_mcq_set(tmp_path / "ds", 240, 4)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.8, seed=3))) as sim:
        monkeypatch.setenv("VLLM_BASE_URL", sim.url)
        code, out = _cli(["run", "mcq", "--model", "vllm/sim-model", "--model", "vllm/other-model", "--data", str(data),
                          "--until-ci", "25", "--out", str(tmp_path / "m"), "--cache-dir", str(tmp_path / "cache"),
                          "--no-progress", "--no-plots"], capsys)
    assert code == 0, out
    blocks = {}
    for run_dir in (tmp_path / "m").iterdir():
        summary = run_dir / "summary.json"
        if summary.is_file() and not run_dir.name.startswith("compare"):
            s = json.loads(summary.read_text())
            blocks[s["model"]] = s["sample"]
    assert sorted(blocks) == ["vllm/other-model", "vllm/sim-model"]
    text = " ".join(out.split())
    board = (tmp_path / "m" / "compare-mcq" / "report.md").read_text()
    for model, block in blocks.items():
        assert block["items"] < block["of"] == 240
        tag = f"sample {block['items']:,}/240 ±{block['half_width']:.1f}"
        assert f"{model}: " in text and tag in text  # the matrix's line per pair
        assert any(model in row and tag in row for row in board.splitlines() if row.startswith("| "))
