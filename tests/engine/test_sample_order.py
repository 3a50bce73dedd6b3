"""The seeded stratified order a sampled run asks in (engine/until/order.py)."""

from __future__ import annotations

import random

from evalkit.core.types import Query
from evalkit.engine.until.order import in_order, sample_order


def _queries(n: int, categories: str = "aab", variants: int = 2) -> list[Query]:
    return [Query(id=f"q{i}-{v}", item_id=f"q{i}", base_id=f"q{i}", variant={"v": v}, messages=(), gold="A",
                  category=categories[i % len(categories)]) for i in range(n) for v in range(variants)]


def test_the_order_depends_on_the_seed_and_the_ids_never_on_the_rows_order():
    qs = _queries(300)
    shuffled = list(qs)
    random.Random(5).shuffle(shuffled)
    assert sample_order(qs, 7) == sample_order(shuffled, 7)
    assert sample_order(qs, 7).sequence != sample_order(qs, 8).sequence
    assert sorted(sample_order(qs, 7).sequence) == sorted({q.base_id for q in qs})


def test_every_prefix_is_a_simple_random_sample_and_each_category_its_own():
    order = sample_order(_queries(3000, "aaaaaabbbc"), 1)  # shares 0.6, 0.3, 0.1
    stratum = order.stratum_of()
    assert order.sizes() == {"a": 1800, "b": 900, "c": 300}
    for n in (100, 333, 1000, 2000):
        seen = [stratum[g] for g in order.sequence[:n]]
        for name, share in (("a", 0.6), ("b", 0.3), ("c", 0.1)):  # hypergeometric: within 4 sd of n * share
            sd = (n * share * (1 - share) * (3000 - n) / 2999) ** 0.5
            assert abs(seen.count(name) - share * n) <= 4 * sd, (n, name)
    # within a stratum the sending order is the stratum's own seeded order
    assert tuple(g for g in order.sequence if stratum[g] == "b") == order.strata["b"]
    # and across seeds the first group is uniform over the set: every category leads in its share
    firsts = [stratum[sample_order(_queries(30, "aaaaaabbbc"), s).sequence[0]] for s in range(2000)]
    assert abs(firsts.count("a") / 2000 - 0.6) < 0.05 and abs(firsts.count("c") / 2000 - 0.1) < 0.03


def test_a_group_is_sent_whole_and_in_its_own_order():
    qs = _queries(40, variants=3)
    sent = in_order(qs, sample_order(qs, 0))
    groups = [q.base_id for q in sent]
    assert len(sent) == 120
    for i in range(0, 120, 3):  # every group's three variants together, variant 0 first
        assert groups[i] == groups[i + 1] == groups[i + 2]
        assert [q.variant["v"] for q in sent[i:i + 3]] == [0, 1, 2]
