"""The stopping rule "stop once the 95 % half-width is at most W points", simulated for the coverage tests.

The simulation itself is product code (evalkit/metrics/analysis/stopping_sim.py: `evalkit plan` and
bench/stopping.py quote its medians), so the rule the tests check is the rule the plan prices.
"""

from __future__ import annotations

from evalkit.metrics.analysis.stopping_sim import FIRST_LOOK, Stops, _urn_block, coverage, until_ci

__all__ = ["FIRST_LOOK", "Stops", "_urn_block", "coverage", "simulate"]


def simulate(p: float, width_points: float, *, n_pop: int, runs: int, seed: int,
             alpha: float = 0.05, tuned: bool = True) -> tuple[float, Stops, Stops]:
    """One cell: a realised population of n_pop items at accuracy p, `runs` seeded random orders; returns
    (truth, the confidence sequence's stops, the fixed-n Wald interval's stops with the finite-population
    correction, checked by the same rule)."""
    sim = until_ci(p, width_points / 100.0, sizes=n_pop, runs=runs, seed=seed, alpha=alpha, tuned=tuned, wald=True)
    assert sim.wald is not None
    return sim.truth, sim.stops, sim.wald
