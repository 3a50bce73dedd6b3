"""Each benchmark's ScoreTable reproduces its headline number exactly, in every way it can be run.

Records come from the bundled samples (prepare -> queries) with a seeded correctness pattern:
each base item gets its own chance of being right, so some items are right in every variant,
some in none; some variants fail as request errors, and some are dropped (incomplete groups).
The RGB-Th-Bench check also replays the 8 recorded VLMs on the real release (shared data).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

import numpy as np
import pytest
from rgbth_common import recorded_replies, replay_replies
from synthetic_data import REPO

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.base import Benchmark
from evalkit.benchmarks.prepare import prepare
from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.grading.grade import grade
from evalkit.metrics.analysis.scoretable import ScoreTable

MISS_BOX = "[0.0, 0.0, 0.01, 0.01]"  # a grounding answer far from every gold box of the sample


def _record(q: Query, correct: bool, *, error: bool = False) -> Record:
    """A graded record of `q`: right (parsed = gold), wrong (another option) or a failed request."""
    if error:
        return Record(q.id, q.item_id, q.base_id, dict(q.variant), "m", "", None, q.gold, error="transient",
                      category=q.category, prompt=q.prompt_text())
    if q.variant.get("task") == "grounding":
        parsed = q.gold if correct else MISS_BOX
    else:
        parsed = q.gold if correct else next((k for k in (q.options or {"Yes": "", "No": ""}) if k != q.gold), None)
    return Record(q.id, q.item_id, q.base_id, dict(q.variant), "m", "", parsed or "", q.gold, parsed=parsed,
                  parse_method="rule", correct=correct, category=q.category, prompt=q.prompt_text())


def synthetic(queries: list[Query], seed: int, *, drop: float = 0.0, errors: float = 0.05) -> list[Record]:
    """Records with a per-item skill: item b is right in each variant with its own probability p_b."""
    rng = random.Random(seed)
    skill: dict[str, float] = {}
    out = []
    for q in queries:
        p = skill.setdefault(q.base_id, rng.choice([0.0, 1.0, rng.random()]))
        if rng.random() < drop:
            continue
        out.append(_record(q, rng.random() < p, error=rng.random() < errors))
    return out


def headline_number(bench: Benchmark, metrics: dict) -> tuple[str, float]:
    """The first numeric entry of the benchmark's headline: what the table must reproduce."""
    return next((k, v) for k, v in bench.headline(metrics)
                if isinstance(v, (int, float)) and not isinstance(v, bool))


def check(bench: Benchmark, records: list[Record], options: dict, metric: str) -> ScoreTable:
    """The table's metric is the headline, its estimate the aggregate's value; keys unique; units items."""
    table = bench.score_table(records, options)
    assert table is not None
    metrics = bench.aggregate(records, options)
    name, value = headline_number(bench, metrics)
    assert table.metric == name == metric
    assert table.estimate() == pytest.approx(metrics[name], abs=1e-9)
    assert len(set(table.keys)) == table.n
    assert set(table.units) <= {r.base_id for r in records}
    units = sorted(set(table.units))  # all-ones bootstrap weights give the estimate back
    assert table.resampled(np.ones((1, len(units))), units)[0] == pytest.approx(table.estimate(), abs=1e-9)
    assert table.values.min(initial=0) >= 0 and table.values.max(initial=0) <= 1
    return table


def _prepared(name: str, **opts) -> tuple[Benchmark, list[Query], dict]:
    options = {"data": "sample", **opts}
    bench, _, queries, *_ = prepare(name, options)
    return bench, queries, options


def _groups(records: list[Record]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for r in records:
        out[r.base_id].add(r.query_id)
    return out


# ---------------------------------------------------------------------------------------
# mcq: plain, --circular, --rotations
# ---------------------------------------------------------------------------------------

MCQ_MODES = [({}, "accuracy", 100.0), ({"circular": True}, "circular_accuracy", 100.0),
             ({"rotations": 4}, "RE", 1.0), ({"rotations": 2}, "RE", 1.0)]


@pytest.mark.parametrize(("opts", "metric", "scale"), MCQ_MODES)
@pytest.mark.parametrize(("seed", "drop"), [(0, 0.0), (1, 0.0), (2, 0.15)])
def test_mcq(opts, metric, scale, seed, drop):
    bench, queries, options = _prepared("mcq", **opts)
    records = synthetic(queries, seed, drop=drop)
    table = check(bench, records, options, metric)
    assert table.scale == scale and table.strata is None
    if opts:  # one observation per base question, all its variants in it
        assert sorted(table.units) == sorted(_groups(records)) and table.binary
    else:
        assert table.n == len(records) and set(table.keys) == {r.query_id for r in records}


def test_mcq_incomplete_circular_group_counts_on_what_it_has():
    bench, queries, options = _prepared("mcq", circular=True)
    records = [_record(q, True) for q in queries]
    records = [r for r in records if not (r.base_id == queries[0].base_id and r.variant["shift"] == 3)]
    table = check(bench, records, options, "circular_accuracy")
    assert table.estimate() == 100.0


# ---------------------------------------------------------------------------------------
# TDBench: RE over categories, grounding with either hit criterion
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("opts", [{}, {"td_set": "main"}, {"td_set": "grounding"},
                                  {"td_grounding": "iou", "td_iou": 0.3}])
@pytest.mark.parametrize(("seed", "drop"), [(0, 0.0), (3, 0.0), (4, 0.1)])
def test_tdbench(opts, seed, drop):
    bench, queries, options = _prepared("tdbench", td_boot=1, **opts)
    records = synthetic(queries, seed, drop=drop)
    table = check(bench, records, options, "RE")
    assert table.scale == 1.0 and table.strata is not None
    assert sorted(table.units) == sorted(_groups(records))  # problem ids are unique across categories here
    assert set(table.strata) == {r.category for r in records}


def test_tdbench_single_rotation_file():
    bench, queries, options = _prepared("tdbench", td_boot=1, data=str(REPO / "datasets/tdbench/tdbench_rot90.tsv"))
    check(bench, synthetic(queries, 5), options, "RE")


# ---------------------------------------------------------------------------------------
# IF-Bench: Avg over languages of the mean over dimensions of per-item shares
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", [None, "en", "cn", "cn,en"])
@pytest.mark.parametrize(("seed", "drop"), [(0, 0.0), (6, 0.0), (7, 0.2)])
def test_ifbench(lang, seed, drop):
    bench, queries, options = _prepared("if-bench", lang=lang)
    records = synthetic(queries, seed, drop=drop)
    table = check(bench, records, options, "Avg")
    assert table.scale == 100.0 and table.strata is not None
    if not drop:  # one observation per (item, language); both languages and all shifts share the unit
        assert table.n == len({(r.item_id, r.variant["lang"]) for r in records})
        assert sorted(set(table.units)) == sorted(_groups(records))
        assert not table.binary


def test_ifbench_languages_with_different_dimensions():
    """A dimension missing in one language: cells are repeated so Avg stays exact."""
    bench, queries, options = _prepared("if-bench")
    gone = queries[0].category
    records = [r for r in synthetic(queries, 8) if not (r.category == gone and r.variant["lang"] == "cn")]
    table = check(bench, records, options, "Avg")
    plain = ScoreTable("Avg", table.units, table.values, tuple(s.split("#")[0] for s in table.strata))
    assert plain.estimate() != pytest.approx(table.estimate(), abs=1e-6)  # the naive cell mean is off


def test_ifbench_records_of_a_language_not_asked_for_are_left_out():
    bench, queries, _ = _prepared("if-bench")
    records = synthetic(queries, 9)
    options = {"lang": "en"}
    table = check(bench, records, options, "Avg")
    assert all(s.startswith("en|") for s in table.strata)


# ---------------------------------------------------------------------------------------
# RGB-Th-Bench: QAcc = mean over skills of question accuracy
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("skills", [None, "all", "Scene Understanding,Warmest Areas Detection"])
@pytest.mark.parametrize("seed", [0, 10])
def test_rgbth(skills, seed):
    bench, queries, options = _prepared("rgb-th-bench", skills=skills)
    records = synthetic(queries, seed)
    table = check(bench, records, options, "QAcc")
    assert table.n == len(records) and set(table.strata) == {r.category for r in records}
    assert bench.score_table([], options) is None


MODELS = 8


def test_rgbth_replay_of_recorded_models(shared_data):
    bench, _, queries, *_ = prepare("rgb-th-bench", {"data": str(shared_data / "rgb-th-bench"),
                                                    "skills": "all"})
    rows: dict[str, list[dict]] = defaultdict(list)
    for path in sorted((shared_data / "rgb-th-bench-outputs").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            rows[row["model"]].append(row)
    assert len(rows) == MODELS
    tables = {}
    for model, model_rows in rows.items():
        replies = replay_replies(queries, recorded_replies(model_rows))
        records = [grade(bench, q, Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant={},
                                          model=model, request_key="", response=replies[q.id], gold=q.gold,
                                          category=q.category, prompt=q.prompt_text()), "official")
                   for q in queries]
        tables[model] = check(bench, records, {"skills": "all"}, "QAcc")
        assert tables[model].n == 1856 and len(set(tables[model].strata)) == 16
    keys = {t.keys for t in tables.values()}
    assert len(keys) == 1  # every model pairs on the same observations


# ---------------------------------------------------------------------------------------
# MME-RealWorld: Avg, item-weighted accuracy
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", ["MME_RealWorld.json", "MME_RealWorld.tsv", "MME_RealWorld_CN.json"])
@pytest.mark.parametrize("seed", [0, 11])
def test_mmerealworld(data, seed):
    bench, queries, options = _prepared("mme-realworld", data=str(REPO / "datasets/mme-realworld" / data))
    records = synthetic(queries, seed, errors=0.1)
    table = check(bench, records, options, "Avg")
    assert table.strata is None and table.n == len(records) and table.scale == 100.0


def test_default_is_plain_accuracy_by_base_item():
    records = synthetic(_prepared("mcq", circular=True)[1], 12)
    table = Benchmark.score_table(get_benchmark("mcq"), records, {})
    assert table.metric == "accuracy" and table.n == len(records)
    assert table.estimate() == pytest.approx(100.0 * sum(r.correct is True for r in records) / len(records))
    assert len(set(table.units)) == len(_groups(records)) < table.n
