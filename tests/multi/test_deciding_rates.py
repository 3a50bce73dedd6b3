"""`--until-decided`'s controller (multi/deciding.py: prefix feeding, Holm over pairs, width, done per
model) reproduces the acceptance rates of issue 46 item 2 in simulation.

The controller is driven directly with simulated answers, as a matrix's runs give them: every model
still asking answers the next block of 8 groups of the seeded order, delivered in a shuffled order
(so each model's answered prefix, not the order of arrival, is what reaches a pair), and each model
asks `done()` before its next block. The same rule is also written a second way, vectorised over
runs (`_reference`: the anytime p-values of every pair along the order, Holm at each look, a model
leaving once all its pairs are decided, its pairs then frozen). The controller must agree with it
run for run, pair for pair (decided or not, at how many items); the rates are then asserted on
2,000 reference runs per case, as the acceptance asks, and on the controller's own runs with the
margins stated (the controller's runs are fewer: a pair that is never decided costs 1,000 updates).
"""

from __future__ import annotations

import math
import random
from itertools import combinations

import numpy as np
import pytest

from evalkit.core.errors import EvalkitError
from evalkit.metrics.analysis.sequential_pairs import PairState, anytime_p_values, log_wealth_items
from evalkit.multi.deciding import Decider

CAP = 1000
BLOCK = 8
ALPHA = 0.05
REFERENCE_RUNS = 2000


def _two(rng: np.random.Generator, delta: float, psi: float, runs: int) -> np.ndarray:
    """Two models' right/wrong: P(A alone right) = (ψ+δ)/2, P(B alone) = (ψ-δ)/2, both right else ½."""
    u = rng.random((runs, CAP))
    a_only = u < (psi + delta) / 2
    b_only = (u >= (psi + delta) / 2) & (u < psi)
    both = (u >= psi) & (rng.random((runs, CAP)) < 0.5)
    return np.stack([a_only | both, b_only | both])


def _shared_ease(rng: np.random.Generator, accuracy_shift: list[float], runs: int) -> np.ndarray:
    """Models on items of a shared difficulty (their answers correlated), each shifted in accuracy."""
    ease = rng.random((runs, CAP))
    return np.stack([rng.random((runs, CAP)) < np.clip(0.35 + 0.5 * ease + s, 0, 1) for s in accuracy_shift])


def _drive(answers: np.ndarray, seed: int, width: float | None = None) -> dict[tuple[str, str], tuple]:
    """One run through the controller: answers[model, item]; returns each pair's (decided, at, items)."""
    models = [f"m{i}" for i in range(answers.shape[0])]
    decider = Decider(models, width=width)
    decider.set_sequence([f"g{t}" for t in range(CAP)])
    shuffle = random.Random(seed).shuffle
    t = 0
    while t < CAP:
        active = [m for m in models if not decider.done(m)]
        if not active:
            break
        block = [(i, s) for s in range(t, min(t + BLOCK, CAP)) for i, m in enumerate(models) if m in active]
        shuffle(block)
        for i, s in block:
            decider.answered(models[i], f"g{s}", float(answers[i, s]))
        t += BLOCK
    return {(v.a, v.b): (v.decided, v.at, v.state.n) for v in decider.verdicts()}


def _holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm's step-down at ALPHA over the first axis (pairs), for every run at once."""
    m = p.shape[0]
    order = np.argsort(p, axis=0, kind="stable")
    ok = np.take_along_axis(p, order, axis=0) <= ALPHA / (m - np.arange(m))[:, None]
    rejected = np.zeros_like(ok)
    np.put_along_axis(rejected, order, np.cumprod(ok, axis=0).astype(bool), axis=0)
    return rejected


def _reference(answers: np.ndarray) -> list[dict[tuple[str, str], tuple]]:
    """The same rule, vectorised over runs: answers[model, run, item] -> per run, each pair's (decided, at,
    items). Looks every BLOCK items and at the end; a model leaves once all its pairs are decided."""
    k, runs, _ = answers.shape
    pairs = list(combinations(range(k), 2))
    p = np.stack([np.concatenate([np.ones((runs, 1)), anytime_p_values(log_wealth_items(answers[i], answers[j]))],
                                 axis=1) for i, j in pairs])  # (pair, run, items seen: 0..CAP)
    fed = np.zeros((len(pairs), runs), dtype=int)
    decided = np.zeros((len(pairs), runs), dtype=bool)
    at = np.full((len(pairs), runs), -1)
    every = np.arange(runs)
    t = 0
    while True:
        seen = np.stack([p[n, every, fed[n]] for n in range(len(pairs))])
        new = _holm_rows(seen) & ~decided
        at[new], decided = fed[new], decided | new
        if t >= CAP:
            break
        active = np.stack([~np.all([decided[n] for n, pair in enumerate(pairs) if m in pair], axis=0)
                           for m in range(k)])
        t = min(t + BLOCK, CAP)
        for n, (i, j) in enumerate(pairs):
            fed[n, active[i] & active[j]] = t
    return [{(f"m{i}", f"m{j}"): ("test" if decided[n, r] else None, int(at[n, r]) if decided[n, r] else None,
                                  int(fed[n, r])) for n, (i, j) in enumerate(pairs)} for r in range(runs)]


def _agree(answers: np.ndarray, runs: int) -> list[dict[tuple[str, str], tuple]]:
    """The controller on the first `runs` runs; asserts it agrees with the reference on each."""
    reference = _reference(answers[:, :runs])
    driven = [_drive(answers[:, r], seed=r) for r in range(runs)]
    for r, (mine, theirs) in enumerate(zip(driven, reference, strict=True)):
        assert mine == theirs, (r, mine, theirs)
    return driven


def _stops(outcomes: list[dict[tuple[str, str], tuple]], pair: tuple[str, str] = ("m0", "m1")) -> np.ndarray:
    return np.array([o[pair][1] if o[pair][0] == "test" else math.inf for o in outcomes], dtype=float)


def test_ten_points_apart_at_thirty_percent_discordance_decided_with_power_and_early():
    answers = _two(np.random.default_rng(46), 0.10, 0.30, REFERENCE_RUNS)
    driven = _agree(answers, 60)
    stops = _stops(_reference(answers))
    assert float(np.mean(stops <= CAP)) >= 0.80
    assert float(np.median(stops)) < 233  # the fixed-design McNemar's 233
    mine = _stops(driven)
    # 60 runs: power 0.8 would give 48 or more with probability 0.6; the rule's own is near 1
    assert float(np.mean(mine <= CAP)) >= 0.80 and float(np.median(mine)) < 233


def test_no_difference_is_called_different_at_most_five_and_a_half_percent():
    answers = _two(np.random.default_rng(4646), 0.0, 0.30, REFERENCE_RUNS)
    driven = _agree(answers, 12)
    assert float(np.mean(np.isfinite(_stops(_reference(answers))))) <= 0.055
    # 12 runs: each runs to the cap undecided unless wrongly rejected (at 5 %, 3 or more of 12: p = 0.02)
    assert sum(o[("m0", "m1")][0] == "test" for o in driven) <= 2
    assert all(o[("m0", "m1")][2] == CAP for o in driven if o[("m0", "m1")][0] is None)


def test_holm_keeps_the_familywise_rate_over_four_equal_models():
    answers = _shared_ease(np.random.default_rng(460), [0.0] * 4, REFERENCE_RUNS)
    driven = _agree(answers, 6)
    family = [any(v[0] == "test" for v in o.values()) for o in _reference(answers)]
    assert float(np.mean(family)) <= 0.055
    assert sum(any(v[0] for v in o.values()) for o in driven) <= 1  # 6 runs: 2 or more at 5 %: p = 0.03


def test_a_model_whose_pairs_are_decided_stops_while_the_others_go_on():
    """Three models, one clearly better: its two pairs are decided early and it leaves; the two equal ones
    go on (to the cap unless their pair is decided), and each pair has the items up to the look at
    which the first of its two models left."""
    answers = _shared_ease(np.random.default_rng(461), [0.25, 0.0, 0.0], 8)
    for o in _agree(answers, 8):
        assert o[("m0", "m1")][0] == o[("m0", "m2")][0] == "test"
        left = {m: max(at for (a, b), (_, at, _) in o.items() if m in (a, b))
                if all(v[0] for (a, b), v in o.items() if m in (a, b)) else CAP for m in ("m0", "m1", "m2")}
        assert left["m0"] < 300
        for (a, b), (_, _, items) in o.items():
            assert items == min(left[a], left[b]), (o, left)


def test_width_decides_a_pair_once_its_interval_is_narrow_enough():
    """Equal models, --width 10: each pair is decided by width at the first look where its interval is
    ±10 points or narrower (checked against a PairState fed the same items, looked at every block)."""
    answers = _two(np.random.default_rng(462), 0.0, 0.30, 3)
    for r in range(3):
        outcome = _drive(answers[:, r], seed=r, width=10)
        decided, at, items = outcome[("m0", "m1")]
        state, first = PairState(), None
        for t in range(CAP):
            if t % BLOCK == 0 and t:
                lo, hi = state.interval(ALPHA)
                if (hi - lo) / 2 <= 0.10 + 1e-12:  # as the controller compares
                    first = t
                    break
            state.update(float(answers[0, r, t]), float(answers[1, r, t]))
        assert decided == "width" and at == first == items, (r, outcome, first)
        assert first < CAP


def test_a_run_on_other_items_and_a_single_model_are_refused():
    decider = Decider(["a", "b"])
    decider.set_sequence(["g1", "g2"], "a")
    with pytest.raises(EvalkitError, match="not on the same items .*not the same set"):
        decider.set_sequence(["g1", "g3"], "b")
    with pytest.raises(EvalkitError, match="another order"):
        decider.set_sequence(["g2", "g1"], "b")
    with pytest.raises(EvalkitError, match="two or more"):
        Decider(["a"])


def test_a_pair_is_settled_when_the_other_model_can_give_no_more():
    """b's run ended after 3 groups: a is done once the pair has those 3, not waiting for more."""
    decider = Decider(["a", "b"])
    decider.set_sequence([f"g{t}" for t in range(10)])
    for t in (2, 0, 1):  # out of order: the prefix forms once g0 is in
        decider.answered("b", f"g{t}", 1.0)
    decider.finish("b")
    decider.answered("a", "g0", 0.0)
    assert not decider.done("a")
    decider.answered("a", "g2", 0.0)
    assert not decider.done("a") and decider.pairs[("a", "b")].state.n == 1  # g2 waits for g1
    decider.answered("a", "g1", 0.0)
    assert decider.done("a") and decider.pairs[("a", "b")].state.n == 3
