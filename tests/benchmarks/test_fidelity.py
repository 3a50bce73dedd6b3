"""Golden fidelity: `--mode official` reads every adversarial answer as the benchmarks' own scoring code does.

The verdict tables in tests/fixtures/fidelity/ were produced by running the official readers
(casiatao/IF-Bench@fc784fc, VLMEvalKit@3ba9220a and e8e78f0, MME-RealWorld@87096fc,
RGB-Th-Benchmark@3250d05) on the answers in tests/fixtures/gen/fid_cases.py; see
tests/fixtures/gen/make_fidelity.py. Unit tests hold evalkit's parse / score / judge_verdict to every
row; the end-to-end tests (test_fidelity_e2e.py) send the answers through the simulated server and a real `evalkit run`, then
check records.jsonl and the headline metric against values computed here from the tables alone.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from fidelity_common import FIDELITY, GEN, OFFICIAL, TABLES, agree, letter, query, rows

from evalkit.benchmarks.ifbench import IFBench
from evalkit.benchmarks.mmerealworld import MMERealWorld, option_text
from evalkit.benchmarks.rgbth import RGBThBench
from evalkit.benchmarks.tdbench import TDBench
from evalkit.benchmarks.tdbench_boxes import box_values
from evalkit.grading import vlmeval

# ---------------------------------------------------------------------------------------
# Unit level: every row of every table
# ---------------------------------------------------------------------------------------


def ifbench_view(row: dict[str, Any], with_reply: bool) -> dict[str, Any]:
    """evalkit's reading: the rule, whether it asks the extractor (and with the official input), the reply."""
    bench, q = IFBench(), query(row)
    parsed = bench.parse(q, row["answer"], "official")
    asks = parsed.answer is None and not parsed.refusal and parsed.method != "empty"
    view: dict[str, Any] = {"letter": letter(parsed.answer), "extractor_called": asks}
    if asks:
        request = bench.judge_request(q, row["answer"], "official")
        view["extractor_called"] = request is not None
        view["input_in_prompt"] = request is not None and row["official"]["extractor_input"] in request.prompt
        if request is not None and with_reply:
            parsed = bench.judge_verdict(q, row["answer"], row["reply"], request.valid, "official")
            view["letter"] = letter(parsed.answer)
    view["correct"] = bool(bench.score(q, parsed))
    return view


def ifbench_official(row: dict[str, Any]) -> dict[str, Any]:
    o = row["official"]
    view = {"letter": o["letter"], "extractor_called": o["extractor_called"], "correct": o["correct"]}
    return {**view, "input_in_prompt": True} if o["extractor_called"] else view


@pytest.mark.parametrize("name", ["ifbench_rule", "ifbench_extractor"])
def test_ifbench_rows(name: str) -> None:
    agree(name, rows(name), ifbench_official, lambda r: ifbench_view(r, name == "ifbench_extractor"))


@pytest.mark.parametrize("parser", vlmeval.PARSERS)
def test_tdbench_mc_rows(parser: str) -> None:
    suffix = "" if parser == "3ba9220a" else "_latest"
    bench = TDBench()

    def evalkit(row: dict[str, Any]) -> dict[str, Any]:
        q = query(row, task="mcq", parser=parser)
        parsed = bench.parse(q, row["answer"], "official")
        read = "Z" if parsed.refusal else parsed.answer
        return {"can_infer": read, "hit": int(bool(bench.score(q, parsed)))}

    def official(row: dict[str, Any]) -> dict[str, Any]:
        return {"can_infer": row["official"][f"can_infer{suffix}"], "hit": row["official"][f"hit{suffix}"]}

    agree(f"tdbench_mc ({parser})", rows("tdbench_mc"), official, evalkit)


def test_tdbench_grounding_rows() -> None:
    bench = TDBench()

    def evalkit(row: dict[str, Any]) -> dict[str, Any]:
        parsed = bench.parse(query(row, task="grounding"), row["answer"], "official")
        box = box_values(parsed.answer)
        hits = {c: bool(bench.score(query(row, task="grounding", criterion=c, iou=0.5), parsed))
                for c in ("center", "iou")}
        iou = vlmeval.bbox_iou(box, box_values(row["gold"])) if box else 0.0
        return {"box": list(box) if box else None, "centroid": hits["center"], "iou>=0.5": hits["iou"],
                "iou": round(iou, 12)}

    def official(row: dict[str, Any]) -> dict[str, Any]:
        o = row["official"]  # VLMEvalKit's iou method scores the IoU itself; evalkit's criterion is IoU >= t
        return {"box": o["box"], "centroid": bool(o["centroid"]), "iou>=0.5": o["iou"] >= 0.5,
                "iou": round(o["iou"], 12)}

    agree("tdbench_grounding", rows("tdbench_grounding"), official, evalkit)


def mme_options(choices: list[str]) -> dict[str, str]:
    return {c[1]: option_text(c, c[1]) for c in choices}


def test_mme_rows() -> None:
    bench = MMERealWorld()

    def evalkit(row: dict[str, Any]) -> dict[str, Any]:
        q = query(row, mme_options(row["choices"]))
        parsed = bench.parse(q, row["answer"], "official")
        return {"letter": parsed.answer or "", "correct": bool(bench.score(q, parsed))}

    agree("mme", rows("mme"), lambda r: r["official"], evalkit)


def test_rgbth_rows() -> None:
    bench = RGBThBench()

    def evalkit(row: dict[str, Any]) -> dict[str, Any]:
        q = query(row, {})
        parsed = bench.parse(q, row["answer"], "official")
        return {"parsed": parsed.answer or "Fail", "correct": bool(bench.score(q, parsed))}

    agree("rgbth", rows("rgbth"), lambda r: r["official"], evalkit)


@pytest.fixture
def generator(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(GEN))
    import make_fidelity

    yield make_fidelity
    for name in ("make_fidelity", "fid_cases", "fid_official"):
        sys.modules.pop(name, None)


def test_tables_cover_every_class_and_shape(generator) -> None:
    tables = {name: rows(name) for name in TABLES}
    assert generator.check_coverage(tables) == []
    for name, table in tables.items():  # ids unique, rows sorted by them, each with its official verdict
        ids = [r["id"] for r in table]
        assert ids == sorted(set(ids)) and all("official" in r for r in table), name
    def right(o: dict[str, Any]) -> bool:
        return bool(o.get("correct", o.get("hit", o.get("centroid"))))

    verdicts = {name: {right(r["official"]) for r in table} for name, table in tables.items()}
    assert all(v == {True, False} for v in verdicts.values()), verdicts  # right and wrong both occur


def test_tables_are_what_the_official_code_says_today(generator) -> None:
    if not (OFFICIAL / "ifb_bench_evaluate.py").is_file():
        pytest.skip(f"official scoring code not present at {OFFICIAL}")
    built = generator.build(OFFICIAL)
    assert sorted(built) == sorted(f"{t}.json" for t in TABLES)
    stale = [name for name, text in built.items() if (FIDELITY / name).read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} out of date: run tests/fixtures/gen/make_fidelity.py --official {OFFICIAL}"
