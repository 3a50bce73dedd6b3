"""RGB-Th-Bench: parsing goldens, metrics, thresholds, loader, and runs against the simulator.

Tests on the real release and the 8 recorded models use the `shared_data` fixture (skipped
when the shared data folder is absent). Real photos are sent at --max-side 256 to keep runs quick; the
answer key's fingerprints survive the resize.
"""

from __future__ import annotations

import csv
import functools
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.prepare import prepare
from evalkit.benchmarks.rgbth import (
    load_release,
    parse_official,
    parse_robust,
    recorded_replies,
    replay_replies,
)
from evalkit.core.errors import EvalkitError
from evalkit.core.types import Query, Record
from evalkit.engine.evaluate import run
from evalkit.grading.grade import grade
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.rgbth import (
    PAPER_SKILLS,
    RGB_TH_TXT,
    RGB_TXT,
    TEXT_REFERENCE,
    rgbth_metrics,
    significance_threshold,
)
from evalkit.sim.from_bench import answer_key_for, replay_key
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

SAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "rgb-th-bench"
MAX_SIDE = 256


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------

OFFICIAL = {
    "Yes": "Yes", "No": "No", "yes.": "Yes", "NO": "No", "The answer is yes": "Yes",
    "Yes, there is no damage": "Yes", "I cannot say": "No", "unknown": "No", "It is not hot.": "No",
    "Nope": "No", "Eyes are visible": "Yes", "\n<|begin_of_box|>No<|end_of_box|>": "No",
    "Maybe": None, "": None, "Error: Server disconnected without sending a response.": None,
    "Hard to tell, but yes": "Yes",
}
ROBUST = {
    "Yes": "Yes", "No": "No", "yes.": "Yes", "The answer is yes": "Yes", "Yes, there is no damage": "Yes",
    "I cannot say": None, "unknown": None, "It is not hot.": None, "Nope": None, "Eyes are visible": None,
    "\n<|begin_of_box|>No<|end_of_box|>": "No", "<think>maybe yes</think>No": "No", "Maybe": None, "": None,
    "Yes or no?": None, "I'm sorry, but I can't help with that. Yes": None,
}


@pytest.mark.parametrize(("text", "want"), OFFICIAL.items())
def test_parse_official_golden(text, want):
    assert parse_official(text) == want


@pytest.mark.parametrize(("text", "want"), ROBUST.items())
def test_parse_robust_golden(text, want):
    assert parse_robust(text) == want


def _query(gold: str = "No") -> Query:
    return Query(id="S/x/b00/q0", item_id="S/x/b00/q0", base_id="S/x/b00/q0", variant={}, messages=(), gold=gold,
                 category="Scene Understanding")


def test_refusal_counted_in_both_modes():
    bench = get_benchmark("rgb-th-bench")
    official = bench.parse(_query(), "I cannot say", "official")
    robust = bench.parse(_query(), "I cannot say", "robust")
    assert (official.answer, official.refusal) == ("No", True)  # substring rule: a refusal scores as No
    assert (robust.answer, robust.method, robust.refusal) == (None, "refusal", True)
    assert bench.score(_query("No"), official) is True and bench.score(_query("No"), robust) is False
    yes = bench.parse(_query(), "Yes, there is no damage", "robust")
    assert (yes.answer, yes.refusal) == ("Yes", False)


# ---------------------------------------------------------------------------------------
# Metrics and thresholds
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 29, 203, 232])
@pytest.mark.parametrize("chance", [0.0625, 0.25, 0.5, 0.999])
def test_significance_threshold_is_the_smallest_count_that_beats_chance(n, chance):
    """The definition, checked count by count: P(X >= k) < alpha for k and not for k - 1."""
    from scipy.stats import binom

    from evalkit.metrics.rgbth import ALPHA

    beats = [k for k in range(n + 1) if binom.sf(k - 1, n, chance) < ALPHA]
    assert significance_threshold(n, chance) == (100.0 * beats[0] / n if beats else None)


def test_significance_thresholds():
    assert round(significance_threshold(812, 0.5), 2) == 52.96
    assert round(significance_threshold(1624, 0.5), 2) == 52.09
    assert round(significance_threshold(203, 0.0625), 2) == 9.85
    assert round(significance_threshold(406, 0.0625), 2) == 8.62
    assert significance_threshold(0, 0.5) is None


def _rec(item_id: str, skill: str, correct: bool, *, parsed: str | None = "Yes", refusal: bool = False) -> Record:
    return Record(query_id=item_id, item_id=item_id, base_id=item_id, variant={}, model="m", request_key="k",
                  response="x", gold="Yes", parsed=parsed, correct=correct, refusal=refusal, category=skill,
                  prompt=f"ctx\n{item_id}")


def test_official_mean_of_skills_and_pooled():
    scene_skill = RGB_TXT[0], RGB_TXT[1]
    recs = []
    # skill A on scene s1: 5 questions, 4 right (group fails); on s2: 3 questions all right (group passes)
    recs += [_rec(f"S/s1/b00/q{i}", scene_skill[0], i < 4) for i in range(5)]
    recs += [_rec(f"S/s2/b00/q{i}", scene_skill[0], True) for i in range(3)]
    # skill B: s1 4/4 (pass), s2 2/4 (fail; one Fail, one refusal)
    recs += [_rec(f"S/s1/b01/q{i}", scene_skill[1], True) for i in range(4)]
    recs += [_rec("S/s2/b01/q0", scene_skill[1], True), _rec("S/s2/b01/q1", scene_skill[1], True),
             _rec("S/s2/b01/q2", scene_skill[1], False, parsed=None),
             _rec("S/s2/b01/q3", scene_skill[1], False, parsed="No", refusal=True)]
    m = rgbth_metrics(recs)
    qa, qb = 100 * 7 / 8, 100 * 6 / 8
    assert m["per_skill"][scene_skill[0]]["QAcc"] == pytest.approx(qa)
    assert m["per_skill"][scene_skill[0]]["SAcc"] == pytest.approx(50.0)
    assert m["QAcc (RGB-Txt)"] == pytest.approx((qa + qb) / 2)  # paper: mean of skills
    assert m["pooled"]["QAcc (RGB-Txt)"] == pytest.approx(100 * 13 / 16)
    assert m["SAcc (RGB-Txt)"] == pytest.approx(50.0) and m["pooled"]["SAcc (RGB-Txt)"] == pytest.approx(50.0)
    assert m["QAcc (RGB-Th-Txt)"] is None and m["columns"]["RGB-Th-Txt"]["questions"] == 0
    assert (m["fails"], m["refusals"], m["n_groups"], m["warnings"]) == (1, 1, 4, [])
    assert m["significance"]["QAcc (Overall)"] == pytest.approx(significance_threshold(16, 0.5))


# ---------------------------------------------------------------------------------------
# Loader (bundled sample)
# ---------------------------------------------------------------------------------------


def test_loader_on_bundled_sample():
    paper, every = load_release(SAMPLE), load_release(SAMPLE, None)
    assert (len(paper), len(every)) == (3 * 14 * 4, 3 * 16 * 4)
    assert {it.category for it in paper} == set(PAPER_SKILLS)
    first = every[0]
    assert first.id == "Source 1/Fuse Box Door/b00/q0" and len(first.images) == 1
    assert first.images[0].value.endswith("Source 1/Fuse Box Door/rgb.jpg")
    pair = next(it for it in every if it.category == RGB_TH_TXT[0] and it.id.startswith("Source 2/1/"))
    assert [Path(str(r.value)).name for r in pair.images] == ["rgb.png", "thermal.png"]
    assert len({it.id for it in every}) == len(every)


def test_loader_errors_name_file_and_block(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(SAMPLE, tree, ignore=shutil.ignore_patterns("*.py"))
    path = tree / "Source 2" / "1" / "questions.json"
    doc = json.loads(path.read_text())
    doc["data"][3]["data_id"] = "1/missing.png"
    path.write_text(json.dumps(doc))
    with pytest.raises(EvalkitError, match=r"questions\.json: block 3: image file not found"):
        load_release(tree)
    doc["data"][3]["data_id"] = "1/rgb.png"
    doc["data"][5]["QAs"][2]["answer"] = "Maybe"
    path.write_text(json.dumps(doc))
    with pytest.raises(EvalkitError, match=r"block 5, question 2: answer 'Maybe'"):
        load_release(tree)
    with pytest.raises(EvalkitError, match="--skills"):
        prepare("rgb-th-bench", {"data": str(tree), "skills": "nonsense"})


def _sample_run(tmp_path: Path, style: str, **opts):
    key = answer_key_for("rgb-th-bench", {"skills": "all"})
    with SimThread(SimConfig(answer_key=key, params=SimParams(style=style))) as sim:
        return run("rgb-th-bench", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / style), no_cache=True,
                   concurrency=16, progress=False, **opts)


def test_bundled_sample_perfect_and_refusing(tmp_path):
    res = _sample_run(tmp_path, "letter")
    m = res.summary["metrics"]
    assert res.summary["n_queries"] == 168 and res.exit_code == 0
    assert (m["QAcc"], m["SAcc"], m["QAcc (RGB-Th-Txt)"], m["fails"], m["warnings"]) == (100.0, 100.0, 100.0, 0, [])
    refusing = _sample_run(tmp_path, "refusal", mode="robust", skills="all")
    m = refusing.summary["metrics"]
    assert (refusing.summary["n_queries"], m["QAcc"], m["refusals"], m["fails"]) == (192, 0.0, 192, 192)
    assert refusing.summary["counts"]["refusals"] == 192


def test_replay_keys_share_one_pipeline():
    """Several models' replay keys over the same queries: one pipeline fingerprints each image once, and
    the keys are those built each with its own pipeline."""
    _, _, queries, _ = prepare("rgb-th-bench", {"data": str(SAMPLE), "skills": "all"})
    replies = [{q.id: reply for q in queries} for reply in ("Yes", "No, it is not.")]
    pipeline = ImagePipeline()
    try:
        shared = [replay_key(queries, r, pipeline) for r in replies]
        images = {p.ref.value for q in queries for p in q.image_parts()}
        assert pipeline.stats.fp_decodes == len(images)
    finally:
        pipeline.close()
    own = [replay_key(queries, r) for r in replies]
    assert [[e.to_dict() for e in k.entries] for k in shared] == [[e.to_dict() for e in k.entries] for k in own]
    assert {e.reply for e in shared[1].entries} == {"No, it is not."}


# ---------------------------------------------------------------------------------------
# The real release (shared data)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_key():
    from conftest import SHARED_DATA

    if not SHARED_DATA.exists():
        pytest.skip(f"real benchmark data not present at {SHARED_DATA}")
    data = SHARED_DATA / "rgb-th-bench"
    return data, answer_key_for("rgb-th-bench", {"data": str(data), "skills": "all", "max_side": MAX_SIDE})


def _real_run(real_key, tmp_path: Path, name: str, params: SimParams | None = None, key=None, **opts):
    data, default_key = real_key
    with SimThread(SimConfig(answer_key=key or default_key, params=params or SimParams())) as sim:
        return run("rgb-th-bench", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / name),
                   no_cache=True, concurrency=64, progress=False, max_side=MAX_SIDE, **opts)


CONTRADICTORY = "Source 1/Fuse panel 2/b09/q3"


def test_real_loader_counts_and_duplicate_warnings(shared_data):
    data = shared_data / "rgb-th-bench"
    bench, items, _, _ = prepare("rgb-th-bench", {"data": str(data)})
    assert len(items) == 1624 and len({it.category for it in items}) == 14
    assert len(load_release(data, None)) == 1856
    assert len(bench.warnings) == 2
    contradictory = [w for w in bench.warnings if "contradictory" in w]
    assert len(contradictory) == 1 and "Source 1/Fuse panel 2" in contradictory[0]
    assert "purple, orange, yellow" in contradictory[0]
    assert any("Source 2/3" in w and "same gold answer" in w for w in bench.warnings)


@pytest.mark.slow
def test_real_perfect_model(real_key, tmp_path, no_plots):
    for skills, n in (("paper", 1624), ("all", 1856)):
        res = _real_run(real_key, tmp_path, f"perfect-{skills}", skills=skills)
        m = res.summary["metrics"]
        assert res.summary["n_queries"] == n and res.summary["counts"]["errors"] == 0
        wrong = [r.item_id for r in res.records if not r.correct]
        assert wrong == [CONTRADICTORY]  # the one question asked twice with opposite golds
        assert m["QAcc (RGB-Txt)"] == m["SAcc (RGB-Txt)"] == 100.0
        for skill, row in m["per_skill"].items():
            expect = (100.0, 100.0) if skill != RGB_TH_TXT[0] else (100 * 115 / 116, 100 * 28 / 29)
            assert (row["QAcc"], row["SAcc"]) == pytest.approx(expect), skill
        assert m["pooled"]["QAcc (Overall)"] == pytest.approx(100 * (n - 1) / n)
        assert any("contradictory" in w for w in m["warnings"])


def _gold_table(data: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """skill -> [(scene, golds of its block)], read straight from the JSON files."""
    out: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for path in sorted(data.rglob("questions.json")):
        for block in json.loads(path.read_text(encoding="utf-8"))["data"]:
            out[block["skill_type"]].append((str(path.parent), [qa["answer"] for qa in block["QAs"]]))
    return out


@pytest.mark.slow
def test_real_always_yes(real_key, tmp_path, no_plots):
    data = real_key[0]
    res = _real_run(real_key, tmp_path, "yes", SimParams(style="yes"), skills="all")
    m = res.summary["metrics"]
    table = _gold_table(data)
    golds = [g for blocks in table.values() for _, gs in blocks for g in gs]
    assert len(golds) == 1856
    assert m["pooled"]["QAcc (Overall)"] == pytest.approx(100 * golds.count("Yes") / len(golds))
    all_yes = sum(all(g == "Yes" for g in gs) for blocks in table.values() for _, gs in blocks)
    assert m["pooled"]["SAcc (Overall)"] == pytest.approx(100 * all_yes / 464)
    per_q = {s: 100 * sum(g == "Yes" for _, gs in b for g in gs) / sum(len(gs) for _, gs in b) for s, b in table.items()}
    per_s = {s: 100 * sum(all(g == "Yes" for g in gs) for _, gs in b) / len(b) for s, b in table.items()}
    for skill in per_q:
        assert m["per_skill"][skill]["QAcc"] == pytest.approx(per_q[skill])
        assert m["per_skill"][skill]["SAcc"] == pytest.approx(per_s[skill])
    assert m["QAcc"] == pytest.approx(sum(per_q.values()) / 16)
    assert m["QAcc (RGB-Th-Txt)"] == pytest.approx(sum(per_q[s] for s in RGB_TH_TXT) / 7)
    assert m["SAcc (RGB-Txt)"] == pytest.approx(sum(per_s[s] for s in RGB_TXT) / 7)


# ---------------------------------------------------------------------------------------
# Replay of the 8 recorded models
# ---------------------------------------------------------------------------------------

MODELS = ["zai-org/GLM-4.5V", "qwen3-vl-plus-non-thinking", "qwen3-vl-flash-non-thinking",
          "doubao-seed-1-6-vision-250815-non-thinking", "doubao-seed-1-6-vision-250815", "gemini-2.5-flash",
          "gemini-2.5-pro", "ggml-org/SmolVLM2-2.2B-Instruct-GGUF:F16"]


def _outputs(shared: Path) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = defaultdict(list)
    for path in sorted((shared / "rgb-th-bench-outputs").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            rows[row["model"]].append(row)
    return rows


def _summary_csv(shared: Path) -> dict[str, dict[str, float]]:
    with (shared / "rgb-th-bench-outputs" / "third_party_summary.csv").open(encoding="utf-8") as fh:
        return {row.pop("model"): {k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)}


def _check_against_files(model: str, records: list[Record], rows: list[dict], table: dict[str, float]) -> None:
    """Per-question correctness equals is_correct; pooled figures equal the CSV to 4 decimals."""
    expected: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for row in rows:
        scene = "/".join(row["file"].replace("\\", "/").split("/")[-3:-1])
        expected[(scene, row["skill"], " ".join(row["question"].split()))].append(bool(row["is_correct"]))
    used: dict[tuple[str, str, str], int] = defaultdict(int)
    for rec in records:
        question = rec.prompt.splitlines()[-1]
        key = (rec.item_id.rsplit("/", 2)[0], rec.category, " ".join(question.split()))
        assert rec.correct is expected[key][used[key]], (model, rec.item_id, rec.response)
        used[key] += 1
    assert sum(used.values()) == len(rows) == 1856
    m = rgbth_metrics(records)
    for column in ("QAcc (Overall)", "SAcc (Overall)", "QAcc (RGB-Txt)", "SAcc (RGB-Txt)", "QAcc (RGB-Th-Txt)"):
        assert round(m["pooled"][column], 4) == table[column], (model, column)
    # The CSV's "SAcc (RGB-Th-Txt)" pools 9 skills (the two text-reference skills included)...
    nine = [*RGB_TH_TXT, *TEXT_REFERENCE]
    wrong = sum(m["per_skill"][s]["SAcc"] * m["per_skill"][s]["groups"] for s in nine) / (29 * 9)
    assert round(wrong, 4) == table["SAcc (RGB-Th-Txt)"]
    # ... evalkit reports the correct 7-skill value.
    seven = sum(m["per_skill"][s]["SAcc"] * m["per_skill"][s]["groups"] for s in RGB_TH_TXT) / 203
    assert m["pooled"]["SAcc (RGB-Th-Txt)"] == pytest.approx(seven)


def test_replay_grading_matches_files_for_all_models(shared_data, recorded):
    """Fast path: the recorded replies graded by the benchmark's own parse/score/aggregate."""
    bench, _, queries, _ = prepare("rgb-th-bench", {"data": str(shared_data / "rgb-th-bench"),
                                                    "skills": "all"})
    outputs, table = recorded
    assert sorted(outputs) == sorted(MODELS)
    for model in MODELS:
        replies = replay_replies(queries, recorded_replies(outputs[model]))
        records = [grade(bench, q, Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant={},
                                          model=model, request_key="", response=replies[q.id], gold=q.gold,
                                          category=q.category, prompt=q.prompt_text()), "official")
                   for q in queries]
        _check_against_files(model, records, outputs[model], table[model])


@pytest.fixture(scope="module")
def recorded(shared_data):
    """The 8 models' recorded answers and the third-party summary, read once for the module."""
    return _outputs(shared_data), _summary_csv(shared_data)


# All 8 recorded models through the whole pipeline (each replay is 1,856 real HTTP round trips to the
# simulator, ~5 s of CPU, most of it the requests themselves; the keys are built once for the module).
PIPELINE_MODELS = MODELS


@pytest.fixture(scope="module")
def replay_keys(shared_data, recorded):
    """model -> its replay key over --skills all at MAX_SIDE (as the replays ask), each built once per
    module on first use; the keys share one image pipeline, so each real image is fingerprinted once."""
    _, _, queries, _ = prepare("rgb-th-bench", {"data": str(shared_data / "rgb-th-bench"), "skills": "all",
                                                "max_side": MAX_SIDE})
    outputs, _ = recorded
    pipeline = ImagePipeline()
    try:  # each key on first use: the cases may be spread over several workers
        yield functools.cache(lambda m: replay_key(queries, replay_replies(queries, recorded_replies(outputs[m])),
                                                   pipeline))
    finally:
        pipeline.close()


@pytest.mark.slow
@pytest.mark.parametrize("model", PIPELINE_MODELS)
def test_replay_through_pipeline(shared_data, replay_keys, recorded, tmp_path, model, no_plots):
    """The recorded raw answers served by the simulator, the whole pipeline, --skills all."""
    outputs, table = recorded
    with SimThread(SimConfig(answer_key=replay_keys(model))) as sim:
        res = run("rgb-th-bench", "vllm/sim-model", data=str(shared_data / "rgb-th-bench"), base_url=sim.url,
                  out=str(tmp_path / "replay"), no_cache=True, concurrency=64, progress=False, max_side=MAX_SIDE,
                  skills="all")
    assert res.summary["n_queries"] == 1856 and res.summary["counts"]["errors"] == 0
    _check_against_files(model, res.records, outputs[model], table[model])


def test_duplicate_questions_are_findings_beside_the_scores():
    """A question asked twice on one scene: an error finding when the golds contradict (no model can
    get both), a warning when they agree; in summary.json, report.md and a console line."""
    import io

    from rich.console import Console

    from evalkit.grading.grade import summarize
    from evalkit.report.console import print_summary
    from evalkit.report.markdown import render_report

    ctx = "Based on this image, answer ...\n"

    def rec(qid: str, question: str, gold: str) -> Record:
        return Record(query_id=qid, item_id=qid, base_id=qid, variant={}, model="m", request_key="k", response=gold,
                      gold=gold, parsed=gold, parse_method="rule", correct=True, category="Object Counting",
                      prompt=ctx + question)

    records = [rec("Source 2/1/b01/q1", "Is there a car?", "Yes"), rec("Source 2/1/b01/q2", "Is there a car?", "No"),
               rec("Source 2/3/b02/q1", "Is it hot?", "Yes"), rec("Source 2/3/b05/q1", "Is it hot?", "Yes"),
               rec("Source 2/4/b01/q1", "Is it hot?", "No")]
    bench = get_benchmark("rgb-th-bench")
    summary = summarize(bench, records, model="m", mode="official", n_items=5, n_queries=5, options={}, config={},
                        judge=None)
    assert [(f["severity"], f["kind"], f["file"], f["items"]) for f in summary["findings"]] == [
        ("error", "duplicate-question", "Source 2/1/questions.json", ["Source 2/1/b01/q1", "Source 2/1/b01/q2"]),
        ("warning", "duplicate-question", "Source 2/3/questions.json", ["Source 2/3/b02/q1", "Source 2/3/b05/q1"])]
    report = render_report(summary)
    assert report.index("## Data findings") < report.index("## Counts")
    assert "| error | duplicate-question | Source 2/1/questions.json |" in report
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=120))
    assert "2 data findings (1 error, 1 warning): see report.md" in out.getvalue()
