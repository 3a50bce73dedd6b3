"""The paper's tables first: for one run of each benchmark, the console and report.md show the paper's
headline table (its columns, in its order) and the main detail table, with values equal to the
summary's and, for one category, to a value computed here from records.jsonl."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from evalkit import run
from evalkit.report.console import print_summary
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


def _run(bench: str, tmp_path: Path) -> tuple[dict, list[dict], str, str]:
    with SimThread(SimConfig(answer_key=answer_key_for(bench, {"data": "sample"}), params=SimParams(theta=0.7, r=0.9))) as sim:
        res = run(bench, "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / "run"),
                  cache_dir=str(tmp_path / "cache"), progress=False, plots=False)
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    out = io.StringIO()
    print_summary(res.summary, Console(file=out, width=80), str(tmp_path / "run"))
    return res.summary, records, out.getvalue(), (tmp_path / "run" / "report.md").read_text()


def _pct(records: list[dict]) -> float:
    return 100.0 * sum(r["correct"] is True for r in records) / len(records)


def _cells(console: str, label: str) -> list[str]:
    line = next(ln for ln in console.splitlines() if ln.strip().startswith(label))
    return line.split()


def test_rgb_th_bench_table_3_and_the_skills(tmp_path):
    summary, records, console, report = _run("rgb-th-bench", tmp_path)
    paper, skills = summary["tables"][:2]
    assert paper["head"] == ["model", "RGB-Txt QAcc", "RGB-Txt SAcc", "RGB-Th-Txt QAcc", "RGB-Th-Txt SAcc",
                             "Overall QAcc", "Overall SAcc"]
    cols = summary["metrics"]["columns"]
    assert paper["rows"][0] == ["vllm/sim-model", cols["RGB-Txt"]["QAcc"], cols["RGB-Txt"]["SAcc"],
                                cols["RGB-Th-Txt"]["QAcc"], cols["RGB-Th-Txt"]["SAcc"], cols["Overall"]["QAcc"],
                                cols["Overall"]["SAcc"]]
    counting = [r for r in records if r["category"] == "Instance Counting"]
    row = next(r for r in skills["rows"] if r[0] == "Instance Counting")
    assert row[2] == pytest.approx(_pct(counting)) and row[4] == len(counting)
    assert _cells(console, "Instance Counting")[-4] == f"{_pct(counting):.2f}"
    assert "| model | RGB-Txt QAcc | RGB-Txt SAcc | RGB-Th-Txt QAcc |" in report
    assert report.index("RGB-Th-Bench Table 3") < report.index("Skills × (QAcc, SAcc)") < report.index("## Counts")
    assert len(console.splitlines()) <= 45 and console.index("Table 3") < console.index("correct ")


def test_mme_realworld_tables_3_and_4(tmp_path):
    summary, records, console, report = _run("mme-realworld", tmp_path)
    perception = summary["tables"][0]
    assert perception["head"][0] == "model" and perception["head"][-2:] == ["Avg", "Avg-C"]
    assert perception["head"][1:-2] == [d for d in ("OCR", "RS", "DT", "MO", "AD")
                                        if d in summary["metrics"]["Perception"]]
    ocr = [r for r in records if r["category"].startswith("Perception/OCR")]
    i = perception["head"].index("OCR")
    assert perception["rows"][0][i] == pytest.approx(_pct(ocr)) and perception["rows"][1][i] == len(ocr)
    assert "MME-RealWorld Table 4: reasoning" in report and "MME-RealWorld Table 3: perception" in console
    assert len(console.splitlines()) <= 45


def test_a_generic_mcq_set_gets_categories_by_accuracy(tmp_path):
    summary, records, console, report = _run("mcq", tmp_path)
    per = summary["tables"][1]
    assert per["head"] == ["category", "accuracy"]
    first = per["rows"][0][0]
    mine = [r for r in records if r["category"] == first]
    assert per["rows"][0][1] == pytest.approx(_pct(mine))
    assert f"| {first} | {_pct(mine):.2f} |" in report


def _share_by_item(records: list[dict]) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for r in records:
        out.setdefault(r["item_id"], []).append(r["correct"] is True)
    return out


def test_if_bench_table_2_and_dimensions_by_language(tmp_path):
    summary, records, console, report = _run("if-bench", tmp_path)
    paper, detail = summary["tables"]
    m = summary["metrics"]
    assert paper["head"] == ["model", "Avg", "SU", "IT", "VC", "TL", "SRU", "OC", "TFU", "AR", "TFR", "CR"]
    assert paper["rows"] == [["vllm/sim-model", m["Avg"], *(m["dimensions"][d] for d in paper["head"][2:])]]
    assert paper["units"] == detail["units"] == "%" and paper["decimals"] == detail["decimals"] == 1
    # Target Localization from records.jsonl: per (item, language) the share of the 4 shifts right (strict:
    # all 4), mean over items, then over the languages
    tl = [r for r in records if r["category"] == "Target Localization"]
    groups = {lg: _share_by_item([r for r in tl if r["variant"]["lang"] == lg]) for lg in ("en", "cn")}
    assert all(len(g) == 4 for by in groups.values() for g in by.values())
    lang = {lg: 100 * sum(sum(g) / 4 for g in by.values()) / len(by) for lg, by in groups.items()}
    strict = {lg: 100 * sum(all(g) for g in by.values()) / len(by) for lg, by in groups.items()}
    mean, strict_mean = (lang["en"] + lang["cn"]) / 2, (strict["en"] + strict["cn"]) / 2
    assert detail["head"] == ["dimension", "EN", "CN", "mean", "strict"]
    row = next(r for r in detail["rows"] if r[0] == "Target Localization (TL)")
    assert row[1:] == pytest.approx([lang["en"], lang["cn"], mean, strict_mean])
    assert paper["rows"][0][paper["head"].index("TL")] == pytest.approx(mean)
    assert detail["rows"][-1] == ["Avg", m["Avg (en)"], m["Avg (cn)"], m["Avg"], m["Avg (strict)"]]
    # the paper's units: percent with one decimal, on the console and in report.md
    assert _cells(console, "vllm/sim-model") == ["vllm/sim-model", *(f"{v:.1f}" for v in paper["rows"][0][1:])]
    assert _cells(console, "Target Localization (TL)")[-4:] == [f"{v:.1f}" for v in row[1:]]
    assert f"| Target Localization (TL) | {' | '.join(f'{v:.1f}' for v in row[1:])} |" in report
    assert "| model | Avg | SU | IT | VC | TL | SRU | OC | TFU | AR | TFR | CR |" in report
    assert (report.index("## IF-Bench Table 2: score per dimension (%)")
            < report.index("## IF-Bench dimensions × language (%)") < report.index("## Counts"))
    assert len(console.splitlines()) <= 45 and console.index("Table 2") < console.index("correct ")


def test_tdbench_tables_2_and_3_then_categories_by_rotation(tmp_path):
    summary, records, console, report = _run("tdbench", tmp_path)
    t2, t3, cats, rel, vlm, grounding = summary["tables"]
    m = summary["metrics"]
    assert t2["head"] == ["model", "VE@0°", "RE", "Δ"]
    assert t2["rows"] == [["vllm/sim-model", m["acc@0"], m["RE"], pytest.approx(m["RE"] - m["acc@0"])]]
    assert t3["head"] == ["model", "RE", "MA", "VE", "θ", "r", "g", "A_adj"]
    assert t3["rows"] == [["vllm/sim-model", m["RE"], m["MA"], m["VE"],
                           *(m["reliability"].get(p) for p in ("theta", "r", "g", "A_adj"))]]
    assert [t["console"] for t in summary["tables"]] == [True, True, True, False, False, False]
    # Object Counting from records.jsonl: per problem, right at each rotation
    rot: dict[str, dict[int, bool]] = {}
    for r in records:
        if r["category"] == "Object Counting":
            rot.setdefault(r["base_id"], {})[r["variant"]["rot"]] = r["correct"] is True
    n = len(rot)
    accs = [sum(p[d] for p in rot.values()) / n for d in (0, 90, 180, 270)]
    expect = [*accs, sum(accs) / 4, sum(all(p.values()) for p in rot.values()) / n,
              sum(not any(p.values()) for p in rot.values()) / n, n]
    assert cats["head"] == ["category", "acc@0", "acc@90", "acc@180", "acc@270", "VE", "RE", "MA", "n"]
    row = next(r for r in cats["rows"] if r[0] == "Object Counting")
    assert row[1:] == pytest.approx(expect)
    assert cats["rows"][-1] == ["mean", m["acc@0"], m["acc@90"], m["acc@180"], m["acc@270"], m["VE"], m["RE"],
                                m["MA"], m["n_problems"]]
    # the paper's estimator per category ("—" without a solution) beside the ML fit ("—" where undefined)
    for cat, sol in m["reliability_per_category"].items():
        line = next(r for r in rel["rows"] if r[0] == cat)
        ml = m["reliability_ml_per_category"][cat]
        assert line[3:7] == ([sol[p] for p in ("theta", "r", "g", "A_adj")] if sol else [None] * 4)
        assert line[7:11] == [ml[p] for p in ("theta", "r", "g", "A_adj")]
        assert ("no moment solution" in line[-1]) == (sol is None) and (ml.get("note", "") in line[-1])
    # VLMEvalKit's nine multiple-choice categories, its Average, and the grounding file apart
    assert [r[0] for r in vlm["rows"][:-2]] == sorted(m["vlmevalkit_per_category"]) and len(vlm["rows"]) == 11
    assert "Visual Grounding" not in m["vlmevalkit_per_category"]
    assert vlm["rows"][-2] == ["Average", *m["vlmevalkit_average"].values()]
    assert vlm["rows"][-1][1:] == list(m["grounding_vlmevalkit"].values())
    assert grounding["rows"][-1][0] == "all" and grounding["rows"][-1][-1] == m["grounding"]["all"]["n"]
    # the paper's units: fractions with three decimals
    assert _cells(console, "vllm/sim-model") == ["vllm/sim-model", *(f"{v:.3f}" for v in t2["rows"][0][1:])]
    assert _cells(console, "Object Coun")[-8:] == [*(f"{v:.3f}" for v in expect[:-1]), str(n)]
    assert f"| Object Counting | {' | '.join(f'{v:.3f}' for v in expect[:-1])} | {n} |" in report
    titles = ["TDBench Table 2: VE@0° vs RE", "TDBench Table 3: RE, MA, VE and reliability",
              "TDBench categories × rotation", "TDBench reliability per category", "TDBench as VLMEvalKit reports it",
              "TDBench Table 4: visual grounding", "Counts"]
    assert [report.index(f"## {t}") for t in titles] == sorted(report.index(f"## {t}") for t in titles)
    assert f"| **Average** | {m['vlmevalkit_average']['total_questions']} | " in report
    assert f"| **mean** | {m['acc@0']:.3f} | {m['acc@90']:.3f} |" in report
    assert len(console.splitlines()) <= 45 and console.index("Table 3") < console.index("categories × rotation")
