"""RGB-Th-Bench runs against the simulator: the bundled sample answered perfectly and by a model that
refuses, then the real release (the `shared_data` fixture; skipped when the shared data folder is
absent) by a perfect model and by one that always says yes, checked against the JSON files. Real
photos are sent at --max-side 256 to keep runs quick."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from rgbth_common import MAX_SIDE

from evalkit.engine.evaluate import run
from evalkit.metrics.rgbth import RGB_TH_TXT, RGB_TXT
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


def _sample_run(tmp_path: Path, style: str, **opts):
    key = answer_key_for("rgb-th-bench", {"data": "sample", "skills": "all"})
    with SimThread(SimConfig(answer_key=key, params=SimParams(style=style))) as sim:
        return run("rgb-th-bench", "vllm/sim-model", data="sample", base_url=sim.url, out=str(tmp_path / style), no_cache=True,
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


@pytest.fixture(scope="module")
def real_key():
    from synthetic_data import SHARED_DATA

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
