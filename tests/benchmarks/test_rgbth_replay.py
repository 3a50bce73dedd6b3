"""RGB-Th-Bench replay of the 8 recorded models (the `shared_data` fixture; skipped when the shared data
folder is absent): their recorded replies graded by the benchmark and served by the simulator through
the whole pipeline, both checked against the files' per-question correctness and pooled figures; and
the replay keys sharing one image pipeline."""

from __future__ import annotations

import csv
import functools
import json
from collections import defaultdict
from pathlib import Path

import pytest
from rgbth_common import MAX_SIDE, SAMPLE, recorded_replies, replay_replies

from evalkit.benchmarks.prepare import prepare
from evalkit.core.record import Record
from evalkit.engine.evaluate import run
from evalkit.grading.grade import grade
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.rgbth import RGB_TH_TXT, TEXT_REFERENCE, rgbth_metrics
from evalkit.sim.from_bench import replay_key
from evalkit.sim.server import SimConfig, SimThread


def test_replay_keys_share_one_pipeline():
    """Several models' replay keys over the same queries: one pipeline fingerprints each image once, and
    the keys are those built each with its own pipeline."""
    _, _, queries, *_ = prepare("rgb-th-bench", {"data": str(SAMPLE), "skills": "all"})
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
    bench, _, queries, *_ = prepare("rgb-th-bench", {"data": str(shared_data / "rgb-th-bench"),
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


# Three of the recorded models through the whole pipeline (each replay is 1,856 real HTTP round trips to
# the simulator, ~5 s of CPU, most of it the requests themselves; the keys are built once for the module):
# the pipeline does the same for every model, and what differs, the answers' text, is graded for all 8
# against the files by test_replay_grading_matches_files_for_all_models. The three span the answer
# styles: a reasoning model's long answers, a hosted API's terse ones, and a small local model's odd ones.
PIPELINE_MODELS = ["zai-org/GLM-4.5V", "gemini-2.5-pro", "ggml-org/SmolVLM2-2.2B-Instruct-GGUF:F16"]


@pytest.fixture(scope="module")
def replay_keys(shared_data, recorded):
    """model -> its replay key over --skills all at MAX_SIDE (as the replays ask), each built once per
    module on first use; the keys share one image pipeline, so each real image is fingerprinted once."""
    _, _, queries, *_ = prepare("rgb-th-bench", {"data": str(shared_data / "rgb-th-bench"), "skills": "all",
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
