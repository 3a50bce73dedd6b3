"""The answered prefix of each stratum (engine/until/prefix.py) and the `--until-ci` rule built on it
(engine/until/ci.py): answers that arrive out of the seeded order wait for the gap before them; the
interval recomputed from the records in any arrival order is the same; the bets' schedule is replayed;
a macro headline weighs its strata equally (ConfSeq's `weights`)."""

from __future__ import annotations

import random

import pytest

from evalkit.core.record import Record
from evalkit.core.types import GenParams, Query
from evalkit.engine.until.ci import UntilCI, schedule_for
from evalkit.engine.until.prefix import Segment
from evalkit.engine.until.value import GroupScore
from evalkit.metrics.analysis.confseq import ConfSeq, StratumState, advance, advance_one, interval
from evalkit.metrics.analysis.scoretable import ScoreTable


def _queries(n: int, variants: int = 1) -> list[Query]:
    cats = ("a", "b", "b", "c")
    return [Query(id=f"q{i}" + (f"-v{v}" if variants > 1 else ""), item_id=f"q{i}", base_id=f"q{i}",
                  variant={"v": v} if variants > 1 else {}, messages=[], gold="A", options={}, params=GenParams(),
                  category=cats[i % 4], meta={})
            for i in range(n) for v in range(variants)]


def _record(q: Query, right: bool, error: str | None = None) -> Record:
    return Record(query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant=q.variant, model="m",
                  request_key="k", response="A", gold="A", parsed="A", parse_method="rule",
                  correct=right if error is None else None, refusal=False, error=error, error_message=None,
                  usage=None, latency_s=0.0, cached=False, finish_reason="stop", category=q.category)


class _Accuracy:
    def score_table(self, records, options):
        return ScoreTable("accuracy", tuple(r.base_id for r in records),
                          tuple(1.0 if r.correct is True else 0.0 for r in records), None, 100.0)


class _Macro:
    def score_table(self, records, options):
        return ScoreTable("RE", tuple(r.base_id for r in records),
                          tuple(1.0 if r.correct is True else 0.0 for r in records),
                          tuple(r.category for r in records), 1.0)


def _truth(n: int, seed: int = 0) -> dict[str, bool]:
    rng = random.Random(seed)
    return {f"q{i}": rng.random() < 0.7 for i in range(n)}


def test_answers_beyond_a_stratums_prefix_wait_and_any_arrival_order_gives_the_same_interval():
    qs = _queries(400)
    truth = _truth(400)
    ordered = UntilCI(qs, GroupScore(_Accuracy(), {}), width=5).order(qs)
    records = [_record(q, truth[q.base_id]) for q in ordered]

    in_order = UntilCI(qs, GroupScore(_Accuracy(), {}), width=5)
    for r in records[:120]:
        in_order.observe(r)
    shuffled = UntilCI(qs, GroupScore(_Accuracy(), {}), width=5)
    late = records[:120]
    random.Random(1).shuffle(late)
    gap = records[0]  # the first group of its stratum: nothing of that stratum counts until it arrives
    for r in late:
        if r is not gap:
            shuffled.observe(r)
    stratum = gap.category
    assert shuffled.prefix.pos[stratum] == 0 and in_order.prefix.pos[stratum] > 0
    shuffled.observe(gap)
    assert shuffled.block() == in_order.block()
    block = in_order.block()
    assert block["items"] == 120 == block["asked"] and block["of"] == 400
    # the interval is the confidence sequence of each stratum's values in its seeded order
    values = {name: [float(truth[g]) for g in groups[:block["strata"][name]["items"]]]
              for name, groups in in_order.sampled.strata.items()}
    low, high = interval(values, in_order.sampled.sizes(), target=0.05)
    assert block["interval"] == [pytest.approx(low * 100), pytest.approx(high * 100)]


def test_a_group_counts_once_all_its_variants_are_in_and_an_error_counts_as_wrong():
    qs = _queries(40, variants=2)
    rule = UntilCI(qs, GroupScore(_Accuracy(), {}), width=50)
    first_group = rule.order(qs)[:2]
    rule.observe(_record(first_group[0], True))
    assert rule.prefix.items() == 0 and rule.block()["asked"] == 1
    rule.observe(_record(first_group[1], True, error="timeout"))  # half right: value 0.5
    assert rule.prefix.items() == 1 and rule.prefix.sums[first_group[0].category] == 0.5


def test_the_rule_is_done_once_the_half_width_is_within_w_and_the_block_goes_when_all_is_asked():
    qs = _queries(200)
    truth = _truth(200, seed=2)
    rule = UntilCI(qs, GroupScore(_Accuracy(), {}), width=15)
    seen = 0
    for q in rule.order(qs):
        rule.observe(_record(q, truth[q.base_id]))
        seen += 1
        if rule.done():
            break
    assert rule.block()["half_width"] <= 15 and seen < 200
    for q in rule.order(qs)[seen:]:
        rule.observe(_record(q, truth[q.base_id]))
    assert rule.block() is None


def test_the_schedule_is_replayed_and_a_new_target_starts_where_the_last_sample_stopped():
    previous = {"rule": "until-ci", "seed": 0, "schedule": [{"target": 0.03, "from": {}}],
                "strata": {"a": {"items": 7, "of": 10}, "b": {"items": 12, "of": 20}}}
    assert schedule_for(previous, 0, 0.03) == [Segment(0.03)]
    assert schedule_for(previous, 0, 0.02) == [Segment(0.03), Segment(0.02, {"a": 7, "b": 12})]
    assert schedule_for(previous, 1, 0.02) == [Segment(0.02)]  # another seed: another order, new bets
    assert schedule_for({**previous, "schedule": "x"}, 0, 0.02) == [Segment(0.02)]  # unreadable: afresh
    qs = _queries(80)
    rule = UntilCI(qs, GroupScore(_Accuracy(), {}), width=2, previous=previous)
    assert rule.prefix.target_at("a", 6) == 0.03 and rule.prefix.target_at("a", 7) == 0.02
    assert rule.prefix.target_at("c", 0) == 0.02  # a stratum the earlier sample never reached


def test_a_macro_headline_weighs_its_strata_equally():
    qs = _queries(400)
    truth = _truth(400, seed=4)
    rule = UntilCI(qs, GroupScore(_Macro(), {}), width=1)
    for q in rule.order(qs)[:200]:
        rule.observe(_record(q, truth[q.base_id]))
    block = rule.block()
    assert block["metric"] == "RE" and block["scale"] == 1.0
    cs = rule.prefix.cs
    assert cs.weights == {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}
    lows = [cs.stratum_interval(name)[0] for name in ("a", "b", "c")]
    assert block["interval"][0] == pytest.approx(sum(lows) / 3, abs=1e-6)
    means = [rule.prefix.sums[n] / rule.prefix.pos[n] for n in ("a", "b", "c")]
    assert block["estimate"] == pytest.approx(min(max(sum(means) / 3, block["interval"][0]), block["interval"][1]),
                                              abs=1e-6)


def test_confseq_weights_are_checked_and_used():
    cs = ConfSeq(sizes={"a": 10, "b": 30}, weights={"a": 0.5, "b": 0.5}).update("a", 1.0).update("b", 0.0)
    (la, ha), (lb, hb) = cs.stratum_interval("a"), cs.stratum_interval("b")
    assert cs.interval() == pytest.approx(((la + lb) / 2, (ha + hb) / 2))
    plain = ConfSeq(sizes={"a": 10, "b": 30}).update("a", 1.0).update("b", 0.0)
    assert plain.interval() == pytest.approx((0.25 * la + 0.75 * lb, 0.25 * ha + 0.75 * hb))
    for bad in ({"a": 1.0}, {"a": 0.7, "b": 0.7}, {"a": -0.5, "b": 1.5}):
        with pytest.raises(ValueError, match="weights"):
            ConfSeq(sizes={"a": 10, "b": 30}, weights=bad)


def test_the_scalar_update_is_the_vector_one():  # the same sums; the last bit may differ (libm vs numpy)
    rng = random.Random(5)
    xs = [float(rng.random() < 0.8) for _ in range(300)]
    for target in (None, 0.02):
        low, high, _ = advance(StratumState(), [xs], 500, 0.05, target)
        one = StratumState()
        for x in xs:
            one = advance_one(one, x, 500, 0.05, target)
        assert (one.low, one.high) == pytest.approx((float(low[0, -1]), float(high[0, -1])), rel=1e-12, abs=1e-12)
