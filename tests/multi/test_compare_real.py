"""`evalkit compare` on the real answers of 8 VLMs to RGB-Th-Bench (the project's shared data folder, EVALKIT_SHARED_DATA; skipped when absent)."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest
from rgbth_common import recorded_replies, replay_replies
from run_factory import make_run

from evalkit.benchmarks.prepare import prepare
from evalkit.core.record import Record
from evalkit.grading.grade import grade
from evalkit.multi.compare import compare


@pytest.fixture(scope="module")
def eight_runs(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("rgbth-runs")
    data = str(shared_data / "rgb-th-bench")
    bench, _, queries, *_ = prepare("rgb-th-bench", {"data": data, "skills": "all"})
    rows: dict[str, list[dict]] = defaultdict(list)
    for path in sorted((shared_data / "rgb-th-bench-outputs").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            rows[row["model"]].append(row)
    dirs = []
    for n, (model, answers) in enumerate(sorted(rows.items())):
        replies = replay_replies(queries, recorded_replies(answers))
        records = [grade(bench, q, Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant={},
                                          model=model, request_key="", response=replies[q.id], gold=q.gold,
                                          category=q.category, prompt=q.prompt_text()), "official")
                   for q in queries]
        dirs.append(make_run(root / f"run{n}", model, records, benchmark="rgb-th-bench", data=data, skills="all"))
    return dirs


@pytest.mark.slow
def test_eight_real_models_ranked_by_official_qacc(eight_runs, tmp_path):
    c = compare(eight_runs, out=tmp_path / "cmp", n_boot=1000)
    official = {m.label: c.runs[m.label].summary["metrics"]["QAcc"] for m in c.results}
    assert len(official) == 8 and c.metric == "QAcc"
    assert c.ranking == sorted(official, key=lambda k: (-official[k], k))
    for m in c.results:
        assert m.estimate == pytest.approx(official[m.label], abs=1e-9)
        assert m.ci.lo < m.estimate < m.ci.hi
        assert 1.0 < m.ci.half_width < 6.0  # ~1,850 yes/no questions
    assert len(c.pairs) == 28 and all(t.mcnemar is not None and t.n_common == 1856 for t in c.pairs)
    best, worst = c.results[0].label, c.results[-1].label
    assert c.pair(best, worst).significant
    # Holm never makes a p-value smaller, and significance follows the adjusted p
    assert all(t.p_holm >= t.p and t.significant == (t.p_holm < 0.05) for t in c.pairs)


@pytest.mark.slow
def test_real_comparison_report_links_every_plot(eight_runs, tmp_path):
    compare(eight_runs, out=tmp_path / "cmp", n_boot=200)
    text = (tmp_path / "cmp" / "report.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {"plots/headline.png", "plots/skills_heatmap.png", "plots/categories.png"} <= set(linked)
    assert all((tmp_path / "cmp" / rel).exists() for rel in linked)
    assert "Temperature to Color Mapping Understanding" in json.dumps(
        json.loads((tmp_path / "cmp" / "comparison.json").read_text())["models"][0]["per_category"])
