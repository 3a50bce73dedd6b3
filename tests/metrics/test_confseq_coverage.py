"""Acceptance simulation for the stopping rule (issue 46, item 1): stop once the 95 % half-width is at
most W points, first look after 50 items, a look after every item.

The confidence sequence must cover the truth at the stopping time in >= 94 % of 2,000 seeded runs in
every cell; a fixed-n Wald interval (with the finite-population correction) under the same rule must
fail that in at least one cell. The sequence's bets are tuned to W (what `--until-ci W` will use). Population: N = 23,600 items, one realised population per cell, each
run asking it in its own seeded random order without replacement.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from confseq_harness import FIRST_LOOK, coverage, simulate  # noqa: E402

N_POP = 23_600
RUNS = 2_000
ACCURACIES = (0.5, 0.8, 0.95, 0.99)
WIDTHS = (1, 2, 5)


@pytest.fixture(scope="module")
def cells():
    out = {}
    for i, p in enumerate(ACCURACIES):
        for j, w in enumerate(WIDTHS):
            out[p, w] = simulate(p, w, n_pop=N_POP, runs=RUNS, seed=4600 + 10 * i + j)
    return out


def test_confidence_sequence_covers_in_every_cell(cells):
    for (p, w), (truth, cs, _) in cells.items():
        assert abs(truth - p) < 0.01
        assert cs.n.min() >= FIRST_LOOK
        # every run stopped where its half-width was at most W points
        assert ((cs.high - cs.low) / 2 <= w / 100 + 1e-12).all(), (p, w)
        cov = coverage(truth, cs)
        assert cov >= 0.94, f"p={p} W={w}: coverage {cov:.4f}"


def test_untuned_bets_cover_too():
    # the all-times bets (no target: a run continued without a width) are valid as well
    for i, (p, w) in enumerate(((0.5, 5), (0.99, 5), (0.95, 2))):
        truth, cs, _ = simulate(p, w, n_pop=N_POP, runs=RUNS, seed=4700 + i, tuned=False)
        assert coverage(truth, cs) >= 0.94, (p, w)


def test_wald_under_the_same_rule_fails_somewhere(cells):
    worst = min((coverage(truth, wald), p, w) for (p, w), (truth, _, wald) in cells.items())
    assert worst[0] < 0.94, f"Wald kept >= 94 % coverage everywhere (worst {worst})"
    # and the sequence stops later than Wald does (the price of validity at every look)
    truth, cs, wald = cells[0.5, 2]
    assert float(cs.n.mean()) > float(wald.n.mean())
