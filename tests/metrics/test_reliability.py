"""The reliability decomposition: exact inversion, degenerate inputs, and both estimators on samples."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.core.record import Record
from evalkit.metrics.moments import decompose, forward
from evalkit.metrics.reliability import (
    binomial_hist_pmf,
    category_table,
    consistency,
    fit_groups,
    fit_histogram,
    histogram,
    reliability_summary,
)


def _ordered_params(n: int, seed: int = 7) -> list[tuple[float, float, float]]:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        theta, g = rng.uniform(0.05, 0.95), rng.uniform(0.0, 0.7)
        r = rng.uniform(g + 0.1, 1.0)
        if r <= 1.0:
            out.append((float(theta), float(r), float(g)))
    return out


def test_round_trip_on_the_ordered_domain():
    worst = 0.0
    for theta, r, g in _ordered_params(200):
        sol = decompose(*forward(theta, r, g))
        assert sol is not None, (theta, r, g)
        worst = max(worst, abs(sol.theta - theta), abs(sol.r - r), abs(sol.g - g))
        assert sol.a_adj == pytest.approx(sol.theta * sol.r, abs=1e-12)
    assert worst < 1e-6


@pytest.mark.parametrize("k", [3, 5, 8])
def test_round_trip_other_k(k):
    for theta, r, g in _ordered_params(30, seed=k):
        sol = decompose(*forward(theta, r, g, k), k=k)
        assert sol is not None
        assert max(abs(sol.theta - theta), abs(sol.r - r), abs(sol.g - g)) < 1e-6


def test_paper_example_row_is_consistent():
    # Table 3, Gemini 2.5 Pro: the solution reproduces its own RE/VE/MA (θ .822, r .909, g .201)
    re, ve, ma = forward(0.822, 0.909, 0.201)
    sol = decompose(re, ve, ma)
    assert sol is not None and sol.a_adj == pytest.approx(0.822 * 0.909, abs=1e-9)


@pytest.mark.parametrize(
    "stats",
    [
        forward(0.6, 0.5, 0.5),  # r = g: RE = VE^4, MA = (1-VE)^4
        (0.05, 0.5, 0.1),  # RE < VE^4
        (0.3, 0.5, 0.0),  # MA = 0
        (0.0, 0.0, 1.0),  # VE = 0
        (1.0, 1.0, 0.0),  # VE = 1
        (0.4, 0.6, 0.01),  # MA < (1-VE)^4
    ],
)
def test_no_solution_is_none(stats):
    assert decompose(*stats) is None


def _sample_counts(n: int, theta: float, r: float, g: float, k: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    known = rng.random(n) < theta
    p = np.where(known, r, g)
    return (rng.random((n, k)) < p[:, None]).sum(axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_both_estimators_on_5000_sampled_problems(seed):
    counts = _sample_counts(5000, 0.7, 0.95, 0.25, seed=seed)
    hist = np.bincount(counts, minlength=5)
    re, ma, ve = hist[4] / 5000, hist[0] / 5000, counts.mean() / 4
    paper = decompose(float(re), float(ve), float(ma))
    assert paper is not None
    ml = fit_histogram(hist, n_boot=100, seed=seed)
    for est in (paper, ml):
        assert abs(est.theta - 0.7) < 0.04
        assert abs(est.r - 0.95) < 0.04
        assert abs(est.g - 0.25) < 0.04
    # the intervals cover the truth and are not absurdly wide
    for name, truth in (("theta", 0.7), ("r", 0.95), ("g", 0.25)):
        lo, hi = ml.ci[name]
        assert lo - 0.01 < truth < hi + 0.01 and hi - lo < 0.1


def test_ml_for_k8_and_ordering():
    counts = _sample_counts(4000, 0.4, 0.9, 0.3, k=8, seed=5)
    fit = fit_histogram(np.bincount(counts, minlength=9), n_boot=0)
    assert fit.k == 8 and fit.r > fit.g
    assert abs(fit.theta - 0.4) < 0.04 and abs(fit.r - 0.9) < 0.03 and abs(fit.g - 0.3) < 0.03


def test_ml_recovers_exact_expected_histogram():
    pmf = binomial_hist_pmf(0.55, 0.92, 0.2, 4)
    fit = fit_histogram(pmf * 1_000_000, n_boot=0)
    assert (fit.theta, fit.r, fit.g) == pytest.approx((0.55, 0.92, 0.2), abs=1e-4)


def test_ml_needs_k_at_least_3():
    with pytest.raises(ValueError):
        fit_histogram([10, 20, 30])


def _records(counts: np.ndarray, k: int) -> list[Record]:
    recs = []
    for i, c in enumerate(counts):
        for j in range(k):
            recs.append(Record(query_id=f"{i}|{j}", item_id=str(i), base_id=str(i), variant={"v": j},
                               model="m", request_key="", response="x", gold="A", correct=bool(j < c)))
    return recs


def test_summary_from_records_any_benchmark():
    counts = _sample_counts(1500, 0.6, 0.9, 0.25, seed=3)
    summary = reliability_summary(_records(counts, 4), n_boot=50)
    assert summary is not None and summary["k"] == 4 and summary["groups"] == 1500
    assert summary["hist"] == histogram(counts.tolist(), 4)
    assert summary["VE"] == pytest.approx(counts.mean() / 4)
    assert abs(summary["ml"]["theta"] - 0.6) < 0.06 and abs(summary["paper"]["g"] - 0.25) < 0.06
    assert len(summary["ml"]["theta_ci"]) == 2
    # two variants per group: not identifiable, no summary
    assert reliability_summary(_records(np.array([1, 2, 0]), 2)) is None


def test_consistency_and_fit_groups():
    groups = {"a": (4, 4), "b": (0, 4), "c": (2, 4), "d": (3, 4)}
    assert consistency(groups) == {"RE": 0.25, "VE": pytest.approx(9 / 16), "MA": 0.25}
    assert fit_groups(groups, n_boot=0) is not None
    assert fit_groups({"a": (1, 2)}) is None


def test_category_table_means_over_solvable():
    stats = {
        "x": dict(zip(("RE", "VE", "MA"), forward(0.8, 0.95, 0.2), strict=True)),
        "y": dict(zip(("RE", "VE", "MA"), forward(0.4, 0.9, 0.3), strict=True)),
        "z": dict(zip(("RE", "VE", "MA"), forward(0.5, 0.5, 0.5), strict=True)),  # unsolvable
    }
    table = category_table(stats)
    assert table["n_solved"] == 2 and table["n_unsolvable"] == 1
    assert table["per_category"]["z"] is None
    assert table["mean"]["theta"] == pytest.approx(0.6, abs=1e-6)
    assert table["mean"]["A_adj"] == pytest.approx((0.8 * 0.95 + 0.4 * 0.9) / 2, abs=1e-6)


# ---- one θ/r/g story: undefined parameters are None, the paper's estimator leads the report ----


def test_a_perfect_model_has_no_lucky_guess_rate():
    fit = fit_histogram([0, 0, 0, 0, 50], n_boot=20).as_dict()
    assert fit["theta"] == pytest.approx(1.0, abs=1e-6) and fit["r"] == pytest.approx(1.0, abs=1e-6)
    assert fit["g"] is None and fit["g_ci"] is None and "no question was guessed" in fit["note"]


def test_where_r_equals_g_theta_is_not_identifiable():
    # what one category of the TDBench fixture fitted to (scipy 1.17: theta 0.54; an earlier release: 0.29)
    from evalkit.metrics.reliability import MixtureFit

    fit = MixtureFit(0.5375, 0.5000000019949915, 0.5000000002151184, 0.2688, 4, 24, -30.0, {}).as_dict()
    assert fit["theta"] is None and fit["A_adj"] is None and fit["g"] is None and "not identifiable" in fit["note"]
    assert fit["r"] == pytest.approx(0.5)


def test_the_report_leads_with_the_papers_estimator_and_shows_a_dash_for_g():
    from run_factory import record

    from evalkit.report.markdown import reliability_section

    records = [record(f"q{i}|s{s}", True, base=f"q{i}", variant={"shift": s}, category=f"c{i % 2}")
               for i in range(40) for s in range(4)]
    rel = reliability_summary(records, n_boot=20)
    assert rel["paper_by_category"] == {"per_category": {"c0": None, "c1": None}, "mean": None,
                                        "solved": 0, "unsolved": 2}
    text = "\n".join(reliability_section(rel))
    assert text.index("The paper's estimator") < text.index("evalkit's estimate")
    assert "the 0 of 2 categories that have one (2 have none)" in text
    assert "| 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] | — | 1.00 [1.00, 1.00] |" in text
    assert "no question was guessed" in text


def test_the_papers_mean_is_over_the_solvable_categories():
    rng = np.random.default_rng(3)
    records = []
    for cat, (theta, r, g) in {"a": (0.6, 0.95, 0.3), "b": (0.5, 0.9, 0.4), "c": (1.0, 1.0, 1.0)}.items():
        for i in range(4000):
            known = rng.random() < theta
            for s in range(4):
                ok = rng.random() < (r if known else g)
                records.append(Record(query_id=f"{cat}{i}|{s}", item_id=f"{cat}{i}", base_id=f"{cat}{i}",
                                      variant={"rot": s}, model="m", request_key="k", response="A", gold="A",
                                      parsed="A" if ok else "B", parse_method="rule", correct=bool(ok),
                                      category=cat))
    by_cat = reliability_summary(records, n_boot=0)["paper_by_category"]
    assert by_cat["solved"] == 2 and by_cat["unsolved"] == 1 and by_cat["per_category"]["c"] is None
    a, b = by_cat["per_category"]["a"], by_cat["per_category"]["b"]
    assert by_cat["mean"]["theta"] == pytest.approx((a["theta"] + b["theta"]) / 2)
    assert a["theta"] == pytest.approx(0.6, abs=0.08) and b["g"] == pytest.approx(0.4, abs=0.08)
