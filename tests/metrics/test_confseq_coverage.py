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


def test_stratified_sequence_covers_the_weighted_mean():
    """Three categories of unequal size and accuracy, asked proportionally (rounds of 6:3:1 items,
    a look after each round), each in its own random order; stop at +-3 points. The combined
    interval (each stratum at alpha/3, weighted by N_h/N) covers the population mean."""
    import numpy as np
    from confseq_harness import _urn_block

    from evalkit.metrics.analysis.confseq import StratumState, advance

    sizes, accs, per_round = (3000, 1500, 500), (0.9, 0.6, 0.3), (6, 3, 1)
    runs, target, alpha = 1000, 0.03, 0.05
    rng = np.random.default_rng(4646)
    ones = [int((rng.random(n) < a).sum()) for n, a in zip(sizes, accs, strict=True)]
    truth = sum(ones) / sum(sizes)
    weights = [n / sum(sizes) for n in sizes]
    left = [np.full(runs, float(k)) for k in ones]
    states = [StratumState() for _ in sizes]
    seen = [0, 0, 0]
    stopped = np.zeros(runs, bool)
    low_at = np.zeros(runs)
    high_at = np.ones(runs)
    n_at = np.zeros(runs)
    for _ in range(sizes[0] // per_round[0]):
        low = np.zeros(runs)
        high = np.zeros(runs)
        for h in range(3):
            x = _urn_block(rng, left[h], seen[h], per_round[h], sizes[h])
            lo, hi, states[h] = advance(states[h], x, sizes[h], alpha / 3, target)
            seen[h] += per_round[h]
            low += weights[h] * lo[:, -1]
            high += weights[h] * hi[:, -1]
        hit = ~stopped & ((high - low) / 2 <= target) & (sum(seen) >= FIRST_LOOK)
        low_at[hit], high_at[hit], n_at[hit] = low[hit], high[hit], sum(seen)
        stopped |= hit
        if stopped.all():
            break
    assert stopped.all()
    assert float(np.median(n_at)) < sum(sizes)  # it did stop early
    cov = float(np.mean((low_at <= truth) & (truth <= high_at)))
    assert cov >= 0.94, (cov, float(np.median(n_at)))
