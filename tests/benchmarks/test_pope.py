"""POPE: loader errors, the official and robust parsers, hand-computed metrics, runs against the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from synthetic_data import REPO

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.pope import binary_metrics, load_pope, parse_official, parse_robust, pope_metrics
from evalkit.benchmarks.prepare import prepare
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

SAMPLE = REPO / "datasets" / "pope" / "pope_sample.jsonl"


@pytest.fixture
def no_plots(monkeypatch):
    """Plots cost about a second each and are tested elsewhere; these runs check the numbers."""
    monkeypatch.setattr("evalkit.report.figures.draw_all", lambda *a, **k: [])


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def _write(folder: Path, rows: list[str], name: str = "pope.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), "white").save(folder / "a.png")
    path = folder / name
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def _row(qid: object = 0, **kw: object) -> str:
    row = {"question_id": qid, "image": "a.png", "text": "Is there a cat in the image?", "label": "yes", **kw}
    return json.dumps({k: v for k, v in row.items() if v is not None})


GOOD = _row(0)
BAD_ROWS = {
    "invalid_json": ('{"question_id": 1, "image": ', "invalid JSON"),
    "not_an_object": ("[1, 2]", "expected a JSON object"),
    "missing_id": (_row(None), "missing field 'question_id' (or 'id')"),
    "missing_image": (_row(1, image=None), "missing field 'image'"),
    "missing_text": (_row(1, text=None), "missing field 'text' (or 'question')"),
    "missing_label": (_row(1, label=None), "missing field 'label' (or 'answer')"),
    "label_not_yes_no": (_row(1, label="maybe"), "label 'maybe' is not yes or no"),
    "duplicate_id": (_row(0), "duplicate id '0' (first on line 1)"),
    "image_missing_on_disk": (_row(1, image="nope.png"), "image file not found"),
    "float_id": (_row(1.5), "not a string or an integer"),
}


@pytest.mark.parametrize("case", BAD_ROWS)
def test_loader_errors_name_file_and_line(tmp_path, case):
    bad, message = BAD_ROWS[case]
    path = _write(tmp_path, [GOOD, "", bad])  # the blank line is skipped but still counted
    with pytest.raises(EvalkitError) as err:
        load_pope(path)
    text = str(err.value)
    assert text.startswith(f"{path}:3: "), text
    assert message in text
    assert "\n" not in text


def test_loader_empty_file_and_missing_path(tmp_path):
    with pytest.raises(EvalkitError, match="no questions"):
        load_pope(_write(tmp_path, [""]))
    with pytest.raises(EvalkitError, match="not found"):
        load_pope(tmp_path / "absent.jsonl")


def test_loader_official_form_split_from_file_name_and_images_folder(tmp_path):
    images = tmp_path / "coco"
    images.mkdir()
    Image.new("RGB", (8, 8), "red").save(images / "x.jpg")
    rows = [json.dumps({"question_id": 0, "image": "x.jpg", "text": "Is there a dog in the image?", "label": "no"}),
            json.dumps({"id": "q1", "image": "x.jpg", "question": " Is there a cat? ", "answer": "Yes"})]
    path = _write(tmp_path / "data", rows, name="coco_pope_adversarial.json")
    items = load_pope(path, images)
    assert [(it.id, it.answer, it.category, it.question) for it in items] == [
        ("0", "No", "adversarial", "Is there a dog in the image?"), ("q1", "Yes", "adversarial", "Is there a cat?")]
    assert items[0].images[0].value == str(images / "x.jpg")
    with pytest.raises(EvalkitError, match="image file not found"):
        load_pope(path)  # without --images the paths are relative to the data file


def test_loader_folder_of_split_files_prefixes_ids(tmp_path):
    for split in ("random", "popular"):
        _write(tmp_path, [_row(0), _row(1, label="no")], name=f"coco_pope_{split}.jsonl")
    items = load_pope(tmp_path)
    assert [it.id for it in items] == ["coco_pope_popular/0", "coco_pope_popular/1",
                                       "coco_pope_random/0", "coco_pope_random/1"]
    assert [it.id for it in load_pope(tmp_path, split="random")] == ["coco_pope_random/0", "coco_pope_random/1"]
    with pytest.raises(EvalkitError, match=r"--pope-split adversarial: .*splits present: random, popular"):
        load_pope(tmp_path, split="adversarial")


def test_bundled_sample_is_balanced_over_three_splits():
    items = load_pope(SAMPLE)
    assert len(items) == 24
    for split in ("random", "popular", "adversarial"):
        answers = [it.answer for it in items if it.category == split]
        assert sorted(answers) == ["No"] * 4 + ["Yes"] * 4
    queries = prepare("pope", {"data": "sample", "pope_split": "popular", "max_side": 64}).queries
    assert len(queries) == 8 and {q.category for q in queries} == {"popular"}
    assert queries[0].prompt_text() == "Is there a box in the image? Please answer yes or no."
    assert queries[0].gold == "Yes" and queries[0].options == {}
    assert queries[0].image_parts()[0].transform.max_side == 64  # make_query applied the run's limit


# ---------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------

# POPE's evaluate.py: first sentence, commas dropped, split on " ", "No"/"no"/"not" -> no, else yes.
OFFICIAL = {
    "Yes": "Yes", "No": "No", "no": "No", "No.": "No", "Yes, there is a dog.": "Yes",
    "No, there is not.": "No", "There is no dog in the image.": "No", "The dog is not visible": "No",
    "Yes. But there is no cat.": "Yes",          # only the first sentence counts
    "Looking closely. No, there is none.": "Yes",  # ... even when the answer comes second
    "NO": "Yes", "Not really": "Yes",            # case-sensitive words
    "No\nThere is none": "Yes",                   # split on spaces only: "No\nThere" is one word
    "Nope": "Yes", "": "Yes", "I'm sorry, I cannot tell": "Yes",
    "no, it is absent": "No",
}
ROBUST = {
    "Yes": "Yes", "No": "No", "no.": "No", "NO": "No", "Yes, there is a dog.": "Yes", "No, there is not.": "No",
    "<think>maybe no</think>Yes": "Yes", "No\nThere is none": "No",
    "There is no dog in the image.": None,  # "no" before a noun is prose, not an answer
    "Yes or no?": None, "Nope": None, "": None, "I'm sorry, I cannot tell": None,
}


@pytest.mark.parametrize(("text", "want"), OFFICIAL.items())
def test_parse_official_golden(text, want):
    assert parse_official(text) == want


@pytest.mark.parametrize(("text", "want"), ROBUST.items())
def test_parse_robust_golden(text, want):
    assert parse_robust(text).answer == want


def _query(gold: str = "Yes") -> Query:
    return Query(id="0", item_id="0", base_id="0", variant={}, messages=(), gold=gold,
                 meta={"question": "Is there a dog in the image?"})


def test_benchmark_parse_methods_refusals_and_judge():
    bench = get_benchmark("pope")
    q = _query("No")
    assert (bench.parse(q, "No", "official").answer, bench.parse(q, "No", "official").method) == ("No", "official")
    empty = bench.parse(q, "", "official")
    assert (empty.answer, empty.method) == ("Yes", "official_empty")  # the script reads "" as yes
    sorry = "I'm sorry, but I can't help with that."
    assert bench.parse(q, sorry, "official").answer == "Yes" and bench.parse(q, sorry, "official").refusal
    refused = bench.parse(q, sorry, "robust")
    assert (refused.answer, refused.method, refused.refusal) == (None, "refusal", True)
    assert bench.parse(q, "There is no dog.", "robust").method == "unparsed"
    assert bench.score(q, bench.parse(q, "No", "robust")) is True
    assert bench.score(q, bench.parse(q, "maybe", "robust")) is False
    jr = bench.judge_request(q, "<think>hm</think>There is no dog.")
    assert jr is not None and jr.valid == ("Yes", "No")
    assert "Is there a dog in the image?" in jr.prompt and "There is no dog." in jr.prompt and "hm" not in jr.prompt


# ---------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------


def _rec(i: int, gold: str, parsed: str | None, category: str = "", error: str | None = None) -> Record:
    return Record(query_id=str(i), item_id=str(i), base_id=str(i), variant={}, model="m", request_key="k",
                  response=None if error else (parsed or "hm"), gold=gold, parsed=parsed,
                  correct=None if error else parsed == gold, error=error, category=category)


def test_metrics_hand_computed_with_unanswered_questions():
    recs = [_rec(0, "Yes", "Yes"), _rec(1, "Yes", "Yes"), _rec(2, "Yes", "Yes"), _rec(3, "Yes", "No"),
            _rec(4, "Yes", None),                       # unparsed yes question: a miss
            _rec(5, "No", "Yes"), _rec(6, "No", "No"), _rec(7, "No", "No"), _rec(8, "No", "No"),
            _rec(9, "No", None, error="timeout")]      # failed no question: wrong, not a false alarm
    m = binary_metrics(recs)
    assert m["confusion"] == {"TP": 3, "FP": 1, "TN": 3, "FN": 1, "unanswered": 2}
    assert m["accuracy"] == 60.0          # (3 + 3) / 10
    assert m["precision"] == 75.0         # 3 / (3 + 1)
    assert m["recall"] == 60.0            # 3 / 5 yes questions
    assert m["F1"] == 200 / 3             # 2*3 / (2*3 + 1 + 1 + 1) = 6/9
    assert m["yes_ratio"] == 40.0         # 4 yes answers / 10
    assert m["n"] == 10


def test_metrics_match_the_official_formulas_when_all_answered():
    golds = ["Yes"] * 5 + ["No"] * 7
    preds = ["Yes"] * 3 + ["No"] * 2 + ["Yes"] * 3 + ["No"] * 4
    m = binary_metrics([_rec(i, g, p) for i, (g, p) in enumerate(zip(golds, preds, strict=True))])
    tp, fp, tn, fn = 3, 3, 4, 2
    p, r = tp / (tp + fp), tp / (tp + fn)
    assert m["confusion"] == {"TP": tp, "FP": fp, "TN": tn, "FN": fn, "unanswered": 0}
    assert (m["accuracy"], m["precision"], m["recall"], m["yes_ratio"]) == (700 / 12, 50.0, 60.0, 50.0)
    assert m["F1"] == pytest.approx(100 * 2 * p * r / (p + r), abs=1e-12)  # 6/11, the script's 2PR/(P+R)
    assert m["F1"] == 600 / 11


def test_metrics_zero_division_and_per_split():
    recs = [_rec(0, "Yes", "No", "random"), _rec(1, "No", "No", "random"),
            _rec(2, "Yes", "Yes", "adversarial"), _rec(3, "No", "Yes", "adversarial")]
    m = pope_metrics(recs)
    assert list(m)[:5] == ["accuracy", "precision", "recall", "F1", "yes_ratio"]
    assert [k for k in m if k in ("random", "popular", "adversarial")] == ["random", "adversarial"]  # paper order
    assert m["random"] == {"accuracy": 50.0, "precision": 0.0, "recall": 0.0, "F1": 0.0, "yes_ratio": 0.0, "n": 2}
    assert m["adversarial"] == {"accuracy": 50.0, "precision": 50.0, "recall": 100.0, "F1": 200 / 3,
                                "yes_ratio": 100.0, "n": 2}
    assert binary_metrics([])["F1"] == 0.0
    assert "random" not in pope_metrics([_rec(0, "Yes", "Yes")])  # no categories, no per-split tables


def test_score_table_is_accuracy_and_equals_the_aggregate():
    bench = get_benchmark("pope")
    recs = [_rec(0, "Yes", "Yes"), _rec(1, "Yes", "No"), _rec(2, "No", "No"), _rec(3, "No", None, error="x")]
    table = bench.score_table(recs, {})
    assert table is not None and table.metric == bench.headline_for({}) == "accuracy"
    assert table.estimate() == bench.aggregate(recs, {})["accuracy"] == 50.0
    assert [k for k, _ in bench.headline(bench.aggregate(recs, {}))][:2] == ["accuracy", "F1"]


# ---------------------------------------------------------------------------------------
# End to end against the simulated server
# ---------------------------------------------------------------------------------------


def _sim_run(tmp_path: Path, params: SimParams, label: str, **opts):
    key = answer_key_for("pope", {"data": "sample", **{k: v for k, v in opts.items() if k == "pope_split"}})
    with SimThread(SimConfig(answer_key=key, params=params)) as sim:
        return run("pope", "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / label), no_cache=True,
                   progress=False, **opts)


def test_e2e_perfect_model_with_report_and_plots(tmp_path):
    res = _sim_run(tmp_path, SimParams(), "perfect")
    m = res.summary["metrics"]
    assert res.exit_code == 0 and res.summary["n_queries"] == 24
    assert (m["accuracy"], m["precision"], m["recall"], m["F1"], m["yes_ratio"]) == (100.0, 100.0, 100.0, 100.0, 50.0)
    assert m["adversarial"]["n"] == 8 and m["adversarial"]["F1"] == 100.0
    assert res.summary["headline"]["metric"] == "accuracy" and res.summary["headline"]["value"] == 100.0
    report = (tmp_path / "perfect" / "report.md").read_text()
    assert "| F1 | 100.00 |" in report and "| adversarial / yes_ratio | 50.00 |" in report


def test_e2e_always_yes_model(tmp_path, no_plots):
    """A model that agrees with everything: the hallucination POPE is built to expose."""
    m = _sim_run(tmp_path, SimParams(style="yes"), "yes").summary["metrics"]
    assert (m["accuracy"], m["precision"], m["recall"], m["yes_ratio"]) == (50.0, 50.0, 100.0, 100.0)
    assert m["F1"] == 200 / 3


def test_e2e_verbose_answers_official_vs_robust(tmp_path, no_plots):
    """The official rule only reads the first sentence: a verbose reply whose "no" comes in the
    second sentence is a yes there, while robust mode reads the answer."""
    verbose = SimParams(style="verbose")
    official = _sim_run(tmp_path, verbose, "official", pope_split="random").summary
    robust = _sim_run(tmp_path, verbose, "robust", pope_split="random", mode="robust").summary
    assert official["n_queries"] == robust["n_queries"] == 8
    assert official["metrics"]["yes_ratio"] == 100.0 and official["metrics"]["accuracy"] == 50.0
    assert robust["metrics"]["accuracy"] == 100.0 and robust["metrics"]["yes_ratio"] == 50.0
    assert official["parser_modes"]["verdicts_differ"] == 4
