"""Golden fidelity end to end: the answers of the verdict tables through the simulated server and a real
`evalkit run <bench> --mode official` on the data read through the Hub (a stand-in); records.jsonl and the headline metric are checked against values
computed here from the tables alone (the tables: test_fidelity.py, tests/fixtures/gen/make_fidelity.py).
"""

from __future__ import annotations

import base64
import functools
import io
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_under_test import run_cli
from fidelity_common import LETTERS, letter, rows
from hub_standin import HubStandin
from PIL import Image

from evalkit.benchmarks.ifbench import IFBench
from evalkit.benchmarks.prepare import prepare
from evalkit.benchmarks.rgbth import PAIR, SINGLE
from evalkit.benchmarks.run_settings import resolve_settings
from evalkit.benchmarks.tdbench_boxes import box_values
from evalkit.core.resources import dataset_path
from evalkit.core.types import Query
from evalkit.metrics.rgbth import PAPER_SKILLS, RGB_TH_TXT
from evalkit.sim.answerkey import AnswerEntry, AnswerKey
from evalkit.sim.from_bench import replay_key
from evalkit.sim.machinery import state as sim_state
from evalkit.sim.model import SimModel
from evalkit.sim.server import SimConfig, SimThread

# ---------------------------------------------------------------------------------------
# End to end: the answers through the simulator and `evalkit run <bench> --mode official`
# ---------------------------------------------------------------------------------------


def png(colour: tuple[int, int, int] = (40, 90, 160), fmt: str = "PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), colour).save(buf, fmt)
    return buf.getvalue()


def queries_of(bench: str, data: Path | None) -> list[Query]:
    options = {"data": str(data) if data else "sample"}
    return prepare(bench, resolve_settings(bench, "", options).bench_dict()).queries


def official_run(tmp_path: Path, bench: str, data: Path | None, key: AnswerKey, *extra: str,
                 judge: bool = False) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """`evalkit run BENCH --mode official` against a simulator answering from `key`, on the data read through
    the Hub (a stand-in serving the data's folder: the files as huggingface_hub caches them, links into
    `blobs/`): (records by query id, summary.json). One attempt per query: an empty reply is asked again
    before it is taken as the answer, and the simulator's replay would only repeat it."""
    out = tmp_path / f"run-{bench}"
    folder = dataset_path("if-bench") if data is None else data if data.is_dir() else data.parent
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    with HubStandin() as hub, SimThread(SimConfig(answer_key=key)) as sim:
        hub.add_commit(f"fidelity/{bench}", files, lfs=[n for n in files if not n.endswith((".json", ".md", ".py"))])
        env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_TOKEN": "", "HF_HUB_OFFLINE": ""}
        args = ["run", bench, "--model", "vllm/sim-model", "--base-url", sim.url, "--mode", "official",
                "--out", str(out), "--no-cache", "--no-progress", "--max-attempts", "1", *extra,
                "--data", f"hf://fidelity/{bench}"]
        if judge:
            args += ["--judge", "vllm/sim-model", "--judge-base-url", sim.url]
        proc = run_cli(args, cwd=tmp_path, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = (out / "records.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(x) for x in lines if x.strip()]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["data_source"]["kind"] == "hub" and summary["data_source"]["endpoint"] == hub.url
    return {r["query_id"]: r for r in records}, summary


def check_records(name: str, assigned: dict[str, dict[str, Any]], records: dict[str, dict[str, Any]],
                  expected: Callable[[str, dict[str, Any]], dict[str, Any]],
                  seen: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Each assigned query's record shows the official reading of its row (listed row by row if not)."""
    bad = []
    for qid, row in sorted(assigned.items()):
        rec = records.get(qid)
        want, got = expected(qid, row), seen(rec) if rec else "no record"
        if want != got:
            bad.append(f"  {qid} <- {row['id']}: answer={row['answer']!r}\n"
                       f"      official={want}\n      evalkit ={got}")
    if bad:
        pytest.fail(f"{name} end to end: {len(bad)} of {len(assigned)} records disagree:\n" + "\n".join(bad),
                    pytrace=False)


def ifbench_avg(correct: dict[str, bool], queries: list[Query]) -> float:
    """IF-Bench's Avg as bench_evaluate computes it: per language, the mean over dimensions of the mean over
    items of the share of circular shifts right; then the mean of the two languages (in %)."""
    share: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for q in queries:
        share[(q.variant["lang"], q.category, q.item_id)].append(correct[q.id])
    dims: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (lang, dim, _), hits in share.items():
        dims[(lang, dim)].append(sum(hits) / len(hits))
    langs: dict[str, list[float]] = defaultdict(list)
    for (lang, _), scores in dims.items():
        langs[lang].append(sum(scores) / len(scores))
    return 100 * sum(sum(v) / len(v) for v in langs.values()) / len(langs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ifbench_rule", "ifbench_extractor"])
def test_ifbench_end_to_end(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled sample's 160 queries, table rows first (the rest answer their gold letter). The extractor
    run's judge is the same simulator replaying each row's extractor reply to evalkit's own judge prompt:
    its built-in judge is switched off by giving its model no extractor prompts to recognise."""
    table, queries = rows(name), sorted(queries_of("if-bench", None), key=lambda q: q.id)
    assert len(queries) >= len(table)
    assigned = {q.id: row for q, row in zip(queries, table, strict=False)}
    key = replay_key(queries, {q.id: assigned[q.id]["answer"] if q.id in assigned else q.gold
                               for q in queries})
    judge = name == "ifbench_extractor"
    if judge:
        no_prompts = tmp_path / "no-extractor-prompts"
        no_prompts.mkdir()
        monkeypatch.setattr(sim_state, "SimModel", functools.partial(SimModel, prompt_dirs=[no_prompts]))
        bench, prompts = IFBench(), {}
        for q in queries:
            row = assigned.get(q.id)
            request = bench.judge_request(q, row["answer"], "official") if row else None
            if request is not None and bench.parse(q, row["answer"], "official").answer is None:
                known = prompts.setdefault(request.prompt, row["reply"])
                assert known == row["reply"], f"one extractor prompt, replies {known!r} and {row['reply']!r}"
        for prompt, reply in prompts.items():
            key.add(AnswerEntry(base_id="judge", text=prompt, images=[], answer="", reply=reply))
    records, summary = official_run(tmp_path, "if-bench", None, key, judge=judge)
    by_id = {q.id: q for q in queries}
    check_records(name, assigned, records,
                  lambda qid, row: {"letter": row["official"]["letter"],
                                    "correct": row["official"]["letter"] == by_id[qid].gold},
                  lambda rec: {"letter": letter(rec["parsed"]), "correct": rec["correct"]})
    # the extractor is asked about exactly the answers the official code hands its extractor
    asked = sorted(qid for qid, row in assigned.items() if row["official"]["extractor_called"])
    waiting = ("llm", "llm_unresolved") if judge else ("unparsed",)
    assert sorted(qid for qid, rec in records.items() if rec["parse_method"] in waiting) == asked
    correct = {q.id: assigned[q.id]["official"]["letter"] == q.gold if q.id in assigned else True
               for q in queries}
    assert summary["metrics"]["Avg"] == pytest.approx(ifbench_avg(correct, queries))


TD_CATEGORIES = ("Object Presence", "Spatial Relationship", "Object Counting")


@pytest.mark.slow
def test_tdbench_end_to_end(tmp_path: Path) -> None:
    """Both tables as one rotation of VLMEvalKit's files: every MC row an item with its own options and
    gold, every grounding row an object with its own true box."""
    mc, boxes = rows("tdbench_mc"), rows("tdbench_grounding")
    data = tmp_path / "tdbench"
    data.mkdir()
    image = base64.b64encode(png(fmt="JPEG")).decode()
    lines = ["index\timage\tquestion\tA\tB\tC\tD\tanswer\tcategory"]
    for i, row in enumerate(mc):
        opts = [row["options"].get(k, "") for k in LETTERS]
        lines.append("\t".join([str(i), image, f"Where is the object? (#{i})", *opts, row["gold"],
                                TD_CATEGORIES[i % 3]]))
    (data / "tdbench_rot0.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = ["index\timage\tquestion\tanswer\tcategory"]
    lines += [f"{1000 + i}\t{image}\tobject number {i}\t{row['gold']}\tVisual Grounding"
              for i, row in enumerate(boxes)]
    (data / "tdbench_grounding_rot0.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assigned = {f"{i}|r0": row for i, row in enumerate(mc)}
    assigned |= {f"{1000 + i}|r0": row for i, row in enumerate(boxes)}
    queries = queries_of("tdbench", data)
    assert sorted(q.id for q in queries) == sorted(assigned)
    records, summary = official_run(tmp_path, "tdbench", data, replay_key(queries, {
        qid: row["answer"] for qid, row in assigned.items()}), "--td-boot", "1")

    def expected(_: str, row: dict[str, Any]) -> dict[str, Any]:
        o = row["official"]
        if "box" in o:
            return {"read": o["box"], "correct": bool(o["centroid"])}
        return {"read": o["can_infer"] if o["can_infer"] != "Z" else None, "correct": bool(o["hit"])}

    def seen(rec: dict[str, Any]) -> dict[str, Any]:
        if rec["variant"].get("task") == "grounding":
            box = box_values(rec["parsed"])
            return {"read": list(box) if box else None, "correct": rec["correct"]}
        return {"read": rec["parsed"], "correct": rec["correct"]}

    check_records("tdbench", assigned, records, expected, seen)
    per_cat: dict[str, list[bool]] = defaultdict(list)
    for i, row in enumerate(mc):
        per_cat[TD_CATEGORIES[i % 3]].append(bool(row["official"]["hit"]))
    share = {cat: sum(v) / len(v) for cat, v in per_cat.items()}
    # VLMEvalKit's RotationalEval "Average" row: the mean over the MC file's categories, rounded to 3
    assert summary["metrics"]["vlmevalkit_average"]["hit_all"] == round(sum(share.values()) / len(share), 3)
    share["Visual Grounding"] = sum(bool(row["official"]["centroid"]) for row in boxes) / len(boxes)
    assert summary["metrics"]["RE"] == pytest.approx(sum(share.values()) / len(share))  # every dimension


MME_SUBTASKS = ("OCR with Complex Context", "Remote Sensing", "Diagram and Table", "Monitoring",
                "Autonomous_Driving")


@pytest.mark.slow
def test_mme_end_to_end(tmp_path: Path) -> None:
    table = rows("mme")
    data = tmp_path / "mme"
    data.mkdir()
    (data / "sign.png").write_bytes(png())
    records = [{"Question_id": f"q{i:03d}", "Image": "sign.png", "Text": f"Question {i}: what is shown?",
                "Answer choices": row["choices"], "Ground truth": row["gold"], "Task": "Perception",
                "Subtask": MME_SUBTASKS[i % 5], "Category": "count"} for i, row in enumerate(table)]
    (data / "MME_RealWorld.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    assigned = {f"q{i:03d}": row for i, row in enumerate(table)}
    queries = queries_of("mme-realworld", data / "MME_RealWorld.json")
    got, summary = official_run(tmp_path, "mme-realworld", data / "MME_RealWorld.json",
                                replay_key(queries, {q: r["answer"] for q, r in assigned.items()}))
    check_records("mme", assigned, got, lambda _, row: row["official"],
                  lambda rec: {"letter": rec["parsed"] or "", "correct": rec["correct"]})
    # eval_your_results.py's "Overall Acc": right answers over all questions
    overall = 100 * sum(r["official"]["correct"] for r in table) / len(table)
    assert summary["metrics"]["Avg"] == pytest.approx(overall)


@pytest.mark.slow
def test_rgbth_end_to_end(tmp_path: Path) -> None:
    """A release tree of one block of (up to) four questions per scene, the skills in turn."""
    table = rows("rgbth")
    root = tmp_path / "rgbth"
    assigned: dict[str, dict[str, Any]] = {}
    skill_of: dict[str, str] = {}
    for b in range(0, len(table), 4):
        scene = root / "Source 1" / f"scene{b // 4:02d}"
        scene.mkdir(parents=True)
        (scene / "rgb.png").write_bytes(png((200, 60, 30)))
        (scene / "thermal.png").write_bytes(png((250, 250, 0)))
        skill = PAPER_SKILLS[(b // 4) % len(PAPER_SKILLS)]
        pair = skill in RGB_TH_TXT
        block = {"skill_type": skill, "data_type": PAIR if pair else SINGLE,
                 "data_id": [f"{scene.name}/rgb.png", f"{scene.name}/thermal.png"] if pair
                 else f"{scene.name}/rgb.png",
                 "QAs": [{"question": f"Is object {b + j} warm?", "answer": row["gold"]}
                         for j, row in enumerate(table[b:b + 4])]}
        (scene / "questions.json").write_text(json.dumps({"data": [block]}), encoding="utf-8")
        for j, row in enumerate(table[b:b + 4]):
            qid = f"Source 1/{scene.name}/b00/q{j}"
            assigned[qid], skill_of[qid] = row, skill
    queries = queries_of("rgb-th-bench", root)
    got, summary = official_run(tmp_path, "rgb-th-bench", root,
                                replay_key(queries, {q: r["answer"] for q, r in assigned.items()}))
    check_records("rgbth", assigned, got, lambda _, row: row["official"],
                  lambda rec: {"parsed": rec["parsed"] or "Fail", "correct": rec["correct"]})
    per_skill: dict[str, list[bool]] = defaultdict(list)
    for qid, row in assigned.items():
        per_skill[skill_of[qid]].append(row["official"]["correct"])
    m = summary["metrics"]
    # the paper's QAcc (mean over skills) is the headline; the third-party script's pooled QAcc beside it
    assert m["QAcc"] == pytest.approx(100 * sum(sum(v) / len(v) for v in per_skill.values()) / len(per_skill))
    pooled = 100 * sum(r["official"]["correct"] for r in table) / len(table)
    assert m["pooled"]["QAcc (Overall)"] == pytest.approx(pooled)
