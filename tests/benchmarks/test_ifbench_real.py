"""IF-Bench on the real question file (shared data folder): counts, the 5,440-query acceptance runs.

The real question file (shared data folder, skipped when absent) with a tiny generated image per
file name, against the in-process simulated server.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from PIL import Image
from synthetic_data import REPO

from evalkit.benchmarks.prepare import prepare
from evalkit.core.record import Record
from evalkit.engine.evaluate import run
from evalkit.grading.grade import grade
from evalkit.images.pipeline import ImagePipeline
from evalkit.sim.answerkey import build_answer_key
from evalkit.sim.model import SimModel, SimParams
from evalkit.sim.server import SimConfig, SimThread

DIMENSION_COUNTS = {"Scene Understanding": 78, "Image Theme": 74, "Viewpoint of Capture": 58,
                    "Target Localization": 73, "Spatial Relationship Understanding": 54, "Object Counting": 87,
                    "Thermal Feature Understanding": 70, "Action Recognition": 65, "Thermal Feature Reasoning": 59,
                    "Commonsense Reasoning": 62}



# ---------------------------------------------------------------------------------------------
# fixtures


def tiny_image(name: str) -> Image.Image:
    """32x32 noise seeded by the file name: distinct fingerprints for every name."""
    rng = random.Random(name)
    return Image.frombytes("L", (32, 32), rng.randbytes(32 * 32)).convert("RGB")


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    shared = REPO.parent / "shared" / "data"
    if not shared.exists():
        pytest.skip(f"real benchmark data not present at {shared}")
    data = shared / "if-bench" / "if_bench.json"
    raw = json.loads(data.read_text(encoding="utf-8"))
    folder = tmp_path_factory.mktemp("ifbench-images")
    for name in sorted({x["dst_thermal_path"] for v in raw.values() for x in v}):
        tiny_image(name).save(folder / name, format="PNG")
    return {"data": str(data), "images": str(folder)}


@pytest.fixture(scope="module")
def prepared(real: dict[str, str]):
    """The real file loaded and expanded once for the module: (bench, items, queries, fingerprints, key)."""
    bench, items, queries, *_ = prepare("if-bench", {**real})
    pipeline = ImagePipeline()
    try:
        fps = {q.id: [pipeline.fingerprint(p) for p in q.image_parts()] for q in queries}
        key = build_answer_key(queries, pipeline.fingerprint)
    finally:
        pipeline.close()
    return bench, items, queries, fps, key


def simulate(prepared, bench_opts: dict, params: SimParams, mode: str = "official") -> tuple[dict, list[Record]]:
    """Every query through the simulated model directly (no HTTP), then the real parse/score/aggregate."""
    bench, _, queries, fps, key = prepared
    model = SimModel(params, key)
    records = []
    for q in queries:
        reply = model.reply(q.prompt_text(), fps[q.id])
        rec = Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant=q.variant, model="sim",
                     request_key="", response=reply.content, gold=q.gold, category=q.category,
                     prompt=q.prompt_text())
        records.append(grade(bench, q, rec, mode))
    return bench.aggregate(records, bench_opts), records



# ---------------------------------------------------------------------------------------------
# acceptance with the real question file


def test_real_file_loads_680_items_in_10_dimensions(prepared) -> None:
    _, items, queries, _, _ = prepared
    assert len(items) == 680 and len(queries) == 5440
    counts: dict[str, int] = {}
    for it in items:
        counts[it.category] = counts.get(it.category, 0) + 1
    assert counts == DIMENSION_COUNTS
    assert len({q.id for q in queries}) == 5440
    assert len({it.images[0] for it in items}) == 499


@pytest.mark.slow
def test_real_run_perfect_model_then_cache_reuse(prepared, real: dict[str, str], tmp_path: Path, no_plots) -> None:
    key = prepared[-1]  # every query's entry, as answer_key_for("if-bench", real) builds it
    common = dict(cache_dir=str(tmp_path / "cache"), progress=False, concurrency=32, **real)
    with SimThread(SimConfig(answer_key=key)) as sim:
        res = run("if-bench", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "both"), **common)
        n1 = sim.counters.snapshot()["requests"]
        again = run("if-bench", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "both"), **common)
        n2 = sim.counters.snapshot()["requests"]
        en = run("if-bench", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "en"), lang="en", **common)
        n3 = sim.counters.snapshot()["requests"]
    assert n1 == 5440 and res.summary["n_queries"] == 5440 and res.exit_code == 0
    m = res.summary["metrics"]
    assert m["Avg"] == 100.0 and m["Avg (strict)"] == 100.0
    assert m["Avg (en)"] == m["Avg (cn)"] == 100.0
    assert set(m["dimensions"].values()) == {100.0} and len(m["dimensions"]) == 10
    assert set(m["dimensions_strict"].values()) == {100.0}
    assert m["consistency"]["all_correct"] == 100.0 and m["consistency"]["variants_per_item"] == 8
    assert n2 == n1  # identical re-runs: zero requests
    assert again.summary["metrics"] == m
    assert n3 == n2 and en.summary["n_queries"] == 2720 and en.summary["cache"]["hits"] == 2720
    assert en.summary["metrics"]["Avg"] == 100.0 and "Avg (cn)" not in en.summary["metrics"]


def test_real_first_option_model_scores_chance_and_zero_strict(prepared, real: dict[str, str]) -> None:
    m, records = simulate(prepared, real, SimParams(style="first"))
    assert len(records) == 5440 and {r.response for r in records} == {"A"}
    for table in ("dimensions", "dimensions_en", "dimensions_cn"):
        assert m[table] and set(m[table].values()) == {25.0}
    assert set(m["dimensions_strict"].values()) == {0.0}
    assert m["Avg"] == 25.0 and m["Avg (strict)"] == 0.0


def test_real_known_accuracy_model(prepared, real: dict[str, str]) -> None:
    p = 0.7
    m, records = simulate(prepared, real, SimParams(theta=1.0, r=p, seed=7))
    per_query = sum(r.correct for r in records) / len(records)
    assert abs(per_query - p) < 0.02
    assert abs(m["Avg"] - 100 * p) <= 2.0
    assert abs(m["Avg (strict)"] - 100 * p**4) <= 3.0
