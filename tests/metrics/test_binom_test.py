"""The exact binomial test without scipy.stats gives scipy's binomtest p-values bit for bit."""

import random

import pytest
from scipy.stats import binomtest

from evalkit.metrics.analysis.binom_test import binom_two_sided


def test_every_fair_coin_count_to_60_is_bit_identical() -> None:
    for n in range(1, 61):
        for k in range(n + 1):
            assert binom_two_sided(k, n, 0.5) == binomtest(k, n, 0.5).pvalue, (k, n)


def test_large_and_uneven_cases_are_bit_identical() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 40_000)
        k = rng.choice([rng.randint(0, n), n // 2 - rng.randint(0, 50) if n > 100 else 0])
        p = rng.choice([0.5, round(rng.uniform(0.01, 0.99), 3)])
        assert binom_two_sided(k, n, p) == binomtest(k, n, p).pvalue, (k, n, p)


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="k=5, n=3"):
        binom_two_sided(5, 3, 0.5)
