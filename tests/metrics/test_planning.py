"""Fixed-design sample sizes quoted by `evalkit plan` (issue 46, item 4's statistics)."""

from __future__ import annotations

import pytest

from evalkit.metrics.analysis.planning import mcnemar_items, mcnemar_items_raw, wald_items, wald_items_raw


def test_wald_items_for_two_points_at_sixty_percent_with_and_without_the_population():
    assert wald_items_raw(0.6, 0.02) == pytest.approx(2304.875, abs=0.01)  # the issue's "about 2,300"
    assert wald_items(0.6, 0.02) == 2305
    assert wald_items_raw(0.6, 0.02, population=23_600) == pytest.approx(2099.88, abs=0.01)  # "2,100"
    assert wald_items(0.6, 0.02, population=23_600) == 2100
    assert wald_items(0.6, 0.02, population=500) < 500  # a small set needs fewer than all its items
    assert wald_items(0.5, 0.01) > wald_items(0.95, 0.01)


@pytest.mark.parametrize(("psi", "quoted", "ceiled"), [(0.1, 76, 77), (0.2, 155, 155), (0.3, 233, 234)])
def test_mcnemar_items_match_the_issue_at_ten_points(psi, quoted, ceiled):
    raw = mcnemar_items_raw(0.10, psi)
    assert round(raw) == quoted  # the issue quotes the nearest whole number
    assert mcnemar_items(0.10, psi) == ceiled  # a plan rounds up
    assert mcnemar_items(-0.10, psi) == ceiled  # the sign of the difference does not matter


def test_more_power_or_a_stricter_alpha_needs_more_items():
    base = mcnemar_items(0.10, 0.3)
    assert mcnemar_items(0.10, 0.3, power=0.9) > base
    assert mcnemar_items(0.10, 0.3, alpha=0.01) > base


@pytest.mark.parametrize(("call", "message"), [
    (lambda: wald_items(1.0, 0.02), "accuracy"),
    (lambda: wald_items(0.5, 0.0), "width"),
    (lambda: mcnemar_items(0.2, 0.1), "discordance"),
    (lambda: mcnemar_items(0.1, 0.3, power=1.0), "power"),
])
def test_impossible_designs_are_one_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
