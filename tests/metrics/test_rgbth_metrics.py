"""RGB-Th-Bench metrics: the significance thresholds (the binomial definition, and the paper's values),
and the official mean of skills beside the pooled figures."""

from __future__ import annotations

import pytest

from evalkit.core.record import Record
from evalkit.metrics.rgbth import RGB_TXT, rgbth_metrics, significance_threshold


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
