"""The statistics behind compare: ScoreTable means, bootstrap intervals, McNemar, Holm, Wilson, sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.core.errors import EvalkitError
from evalkit.metrics.analysis.correlation import ModelSize, load_sizes, size_correlation
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.analysis.significance import (
    all_pairs,
    bootstrap_ci,
    holm,
    mcnemar_exact,
    paired_test,
    wilson,
)


def _binary(n: int, right: int, prefix: str = "") -> ScoreTable:
    return ScoreTable.plain("accuracy", [f"{prefix}{i}" for i in range(n)], [1.0] * right + [0.0] * (n - right))


def test_macro_table_is_the_mean_of_cell_means():
    t = ScoreTable.plain("Avg", ["a", "b", "c", "d"], [1, 0, 1, 1], strata=["x", "x", "y", "y"])
    assert t.estimate() == pytest.approx(75.0)  # (50 + 100) / 2, not 3/4 pooled... which is also 75
    t = ScoreTable.plain("Avg", ["a", "b", "c", "d"], [1, 0, 0, 1], strata=["x", "x", "x", "y"])
    assert t.estimate() == pytest.approx(100 * (1 / 3 + 1) / 2)
    assert ScoreTable.plain("RE", ["a", "b"], [1, 0], scale=1.0).estimate() == pytest.approx(0.5)


def test_units_resample_together():
    """Two observations of one unit move together: weights on units, not on observations."""
    t = ScoreTable.plain("acc", ["u1", "u1", "u2"], [1, 1, 0])
    units = ["u1", "u2"]
    assert t.resampled(np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), units) == pytest.approx([100, 0, 200 / 3])


def test_bootstrap_half_width_matches_the_normal_approximation():
    ci = bootstrap_ci(_binary(1000, 700), n_boot=2000, seed=3)
    expected = 1.96 * math.sqrt(0.7 * 0.3 / 1000) * 100
    assert ci.estimate == pytest.approx(70.0)
    assert ci.half_width == pytest.approx(expected, rel=0.12)
    assert bootstrap_ci(_binary(1000, 700), n_boot=2000, seed=3) == ci  # seeded: reproducible


def test_mcnemar_exact_is_the_two_sided_binomial():
    n, k = 200, 90
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    assert mcnemar_exact(90, 110) == pytest.approx(2 * tail)
    assert mcnemar_exact(110, 90) == mcnemar_exact(90, 110)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 2**10)


def test_holm_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([0.9, 0.8, 0.7]) == [1.0, 1.0, 1.0]
    assert holm([0.2, 0.3, 0.01]) == pytest.approx([0.4, 0.4, 0.03])
    assert holm([]) == []


def test_identical_models_do_not_differ():
    a, b = _binary(300, 200), _binary(300, 200)
    t = paired_test("a", a, "b", b, n_boot=500)
    assert t.diff.estimate == 0 and t.diff.lo == 0 and t.diff.hi == 0
    assert t.mcnemar.p == 1.0 and t.p_bootstrap == 1.0


def test_pairs_use_only_shared_observations():
    a = _binary(100, 100)
    b = ScoreTable.plain("accuracy", [str(i) for i in range(50, 150)], [0.0] * 100)
    t = paired_test("a", a, "b", b, n_boot=200)
    assert t.n_common == 50 and (t.mcnemar.only_a, t.mcnemar.only_b) == (50, 0)
    assert t.diff.estimate == pytest.approx(100.0)


def test_fractional_scores_skip_mcnemar_and_use_the_bootstrap():
    rng = np.random.default_rng(0)
    units = [str(i) for i in range(400)]
    a = ScoreTable.plain("Avg", units, rng.choice([0, 0.25, 0.5, 0.75, 1.0], 400, p=[.1, .1, .2, .2, .4]))
    b = ScoreTable.plain("Avg", units, rng.choice([0, 0.25, 0.5, 0.75, 1.0], 400, p=[.3, .2, .2, .2, .1]))
    (t,) = all_pairs({"a": a, "b": b}, n_boot=500)
    assert t.mcnemar is None and t.p == t.p_bootstrap and t.significant
    assert t.diff.lo > 0


def test_wilson_interval():
    lo, hi = wilson(7, 10)
    assert (lo, hi) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    assert wilson(0, 0) == (0.0, 0.0)
    assert wilson(10, 10)[1] == pytest.approx(1.0)


def test_size_correlation_needs_three_models_per_family():
    sizes = {"a": ModelSize("f", 1), "b": ModelSize("f", 2), "c": ModelSize("f", 4), "d": ModelSize("g", 7),
             "e": ModelSize("g", 70)}
    out = size_correlation({"a": 10, "b": 20, "c": 25, "d": 40, "e": 30, "z": 1}, sizes)
    assert list(out["per_family"]) == ["f"] and out["skipped"] == {"g": 2} and out["unsized"] == ["z"]
    assert out["per_family"]["f"]["spearman"] == pytest.approx(1.0)
    assert out["mean"]["pearson"] == pytest.approx(np.corrcoef([1, 2, 4], [10, 20, 25])[0, 1])


def test_sizes_file_errors_name_the_file(tmp_path):
    good = tmp_path / "s.json"
    good.write_text('{"m": {"family": "f", "size": "7B"}}')
    assert load_sizes(good) == {"m": ModelSize("f", 7.0)}
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": {"size": 7}}')
    with pytest.raises(EvalkitError, match=r"bad.json: model 'm' needs 'family' and 'size'"):
        load_sizes(bad)
    cols = tmp_path / "cols.csv"
    cols.write_text("name,size\nm,7\n")
    with pytest.raises(EvalkitError, match=r"cols.csv: missing column\(s\) family, model"):
        load_sizes(cols)
    with pytest.raises(EvalkitError, match="not found"):
        load_sizes(tmp_path / "none.csv")
