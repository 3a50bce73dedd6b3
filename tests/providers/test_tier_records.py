"""The service-tier facts of the provider records and their prices (issue 45, item 1): every record that
sells a tier says how a request names it, where the reply reports it, its docs and the date they were
read; the wire helpers every client shares; the price of an answer at each tier; the flags together."""

from __future__ import annotations

import json

import pytest

from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig
from evalkit.core.tiers import TIERS, tier_counts
from evalkit.money.pricing import load_prices, price_of
from evalkit.providers.registry import RECORDS
from evalkit.providers.tiers import ServiceTiers, served_tier, tier_problem

SELLING = [r for r in RECORDS.values() if r.tiers is not None]


@pytest.mark.parametrize("record", SELLING, ids=lambda r: r.name)
def test_every_record_that_sells_a_tier_says_how_and_where_it_read_so(record):
    tiers = record.tiers
    assert tiers.sells and set(tiers.sells) <= set(TIERS) - {"standard"}
    for side in ("request", "reply"):
        kind, name = tiers.where(side)
        assert kind in ("body", "header") and name, (record.name, side)
    assert all(tiers.wire_value(t) for t in tiers.sells), record.name  # each tier sold has its spelling
    assert tiers.sources and all(s.startswith("https://") for s in tiers.sources)
    assert tiers.read_on == "2026-11-29"


def test_the_wire_helpers_build_the_body_or_header_and_read_the_reply():
    body_tiers = ServiceTiers(sells=("flex",), request="body:serviceTier.type", reply="body:meta.tier",
                              spelling=(("flex", "FLEX"),), reported=(("FLEX", "flex"), ("STD", "standard")))
    assert body_tiers.body_fields("flex") == {"serviceTier": {"type": "FLEX"}}
    assert body_tiers.body_fields(None) == {} and body_tiers.headers("flex") == {}
    assert body_tiers.reply_value({"meta": {"tier": "FLEX"}}, {}) == "flex"
    assert body_tiers.reply_value({"meta": {}}, {}) is None
    assert body_tiers.reply_value({"meta": {"tier": "turbo"}}, {}) == "turbo"  # kept as the reply spelled it
    header_tiers = ServiceTiers(sells=("priority",), request="header:X-Tier", reply="header:x-served-tier",
                                spelling=(("priority", "priority"),), reported=(("default", "standard"),))
    assert header_tiers.headers("priority") == {"X-Tier": "priority"} and header_tiers.body_fields("priority") == {}
    assert header_tiers.reply_value(None, {"X-Served-Tier": "default"}) == "standard"
    # a run that asked no tier: a reply saying standard is not recorded, another tier is
    assert served_tier(header_tiers, None, None, {"x-served-tier": "default"}) is None
    assert served_tier(header_tiers, None, None, {"x-served-tier": "priority"}) == "priority"
    assert served_tier(header_tiers, "priority", None, {"x-served-tier": "default"}) == "standard"


def test_a_tier_a_provider_does_not_sell_is_one_line_naming_the_flag():
    assert tier_problem("vllm", RECORDS["vllm"].tiers, "flex") == \
        "--service-tier flex: vllm/ sells no service tiers (leave the flag out)"
    assert tier_problem("azure", RECORDS["azure"].tiers, "priority") == \
        "--service-tier priority: azure/ sells flex besides standard"
    assert tier_problem("vllm", None, "standard") is None and tier_problem("azure", RECORDS["azure"].tiers, "flex") is None


@pytest.mark.parametrize(("kw", "message"), [
    ({"tier_fallback": "standard"}, "--tier-fallback standard needs --service-tier flex or priority"),
    ({"service_tier": "flex", "batch": True}, "--service-tier flex is for live requests: give it or --batch"),
])
def test_the_tier_flags_together(kw, message):
    with pytest.raises(EvalkitError, match=message):
        RunConfig(model="openai/gpt-4o", **kw)
    assert RunConfig(model="openai/gpt-4o", service_tier="flex", tier_fallback="standard").request_timeout == 900.0


def test_an_answer_is_priced_at_its_tier():
    table = load_prices()
    gpt4o = table.price_for("openai", "gpt-4o")
    flex = price_of(gpt4o, None, "flex")  # OpenAI: the Batch API's price
    assert (flex.input_per_m, flex.cached_input_per_m, flex.output_per_m) == (1.25, 0.625, 5.0)
    priority = price_of(gpt4o, None, "priority")  # OpenAI's priority table, per model
    assert (priority.input_per_m, priority.cached_input_per_m, priority.output_per_m) == (4.25, 2.125, 17.0)
    assert price_of(table.price_for("openai", "gpt-4o-2024-08-06"), None, "priority").input_per_m == 4.25
    assert price_of(gpt4o, None, "standard") is gpt4o and price_of(gpt4o, None, None) is gpt4o
    assert price_of(gpt4o, "batch", None).input_per_m == 1.25


def test_a_tier_without_a_known_price_has_none(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/my-model": {"input": 1, "output": 4},
                                  "azure/my-dep": {"input": 2, "output": 8}}))
    table = load_prices(prices)
    assert price_of(table.price_for("openai", "my-model"), None, "priority") is None  # never a guess
    assert price_of(table.price_for("openai", "my-model"), None, "flex").input_per_m == 0.5  # the batch price
    azure = price_of(table.price_for("azure", "my-dep"), None, "flex")
    assert (azure.input_per_m, azure.output_per_m) == (1.0, 4.0)  # Azure: 50 % off


def test_the_summary_counts_answers_per_tier():
    assert tier_counts(["flex", "flex", None, "standard"]) == {"flex": 2, "standard": 1, "unreported": 1}
