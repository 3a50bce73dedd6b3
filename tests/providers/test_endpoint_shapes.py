"""Azure OpenAI and OpenRouter, the pure parts (issue 30, items 3-5): routes, endpoint identity, error kinds,
reported costs, prices, reasoning fields, image limits and the preflight's reading. The wire itself is
checked against the simulator in test_azure_runs.py and test_openrouter_runs.py."""

from __future__ import annotations

import math

import pytest

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.types import GenParams, Usage
from evalkit.money.costs import record_cost, records_cost
from evalkit.money.pricing import load_prices
from evalkit.providers import create_provider, parse_spec
from evalkit.providers.azure.client import chat_base
from evalkit.providers.base import ProviderSpec
from evalkit.providers.openai.compat import error_kind
from evalkit.providers.openai.format import response_from_openai
from evalkit.providers.preflight import _request, judge_reply
from evalkit.providers.reasoning import chat_fields
from evalkit.providers.registry import limits_for
from evalkit.providers.wire.rate_headers import rate_info

AZURE_ENV = {"AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com/", "AZURE_OPENAI_API_KEY": "k"}


def test_the_classic_route_with_an_api_version_and_the_v1_api_without():
    assert chat_base("https://res.openai.azure.com/", "my gpt", "2024-10-21") == (
        "https://res.openai.azure.com/openai/deployments/my%20gpt", "/chat/completions?api-version=2024-10-21")
    assert chat_base("https://res.openai.azure.com/openai/v1/", "d", None) == (
        "https://res.openai.azure.com/openai/v1", "/chat/completions")


def test_one_azure_endpoint_however_the_resource_url_is_pasted_and_whatever_the_api_version():
    spellings = ("https://res.openai.azure.com", "https://res.openai.azure.com/", "https://res.openai.azure.com/openai",
                 "https://res.openai.azure.com/openai/v1/", "https://user:pw@res.openai.azure.com/openai/v1")
    assert {parse_spec("azure/d", (u,)).endpoint for u in spellings} == {"https://res.openai.azure.com"}
    assert parse_spec("azure/d", (), AZURE_ENV).endpoint == "https://res.openai.azure.com"
    with pytest.raises(EvalkitError, match=r"needs --base-url \(or AZURE_OPENAI_ENDPOINT\)"):
        parse_spec("azure/d", (), {})


def test_the_azure_key_goes_as_api_key_only_and_an_entra_token_as_the_bearer():
    spec = parse_spec("azure/d", (), AZURE_ENV)
    keyed = create_provider(spec, AZURE_ENV)
    assert keyed._headers["api-key"] == "k" and "Authorization" not in keyed._headers
    entra = create_provider(spec, {"AZURE_OPENAI_AD_TOKEN": "tok-1234567890"})
    assert entra._headers["Authorization"] == "Bearer tok-1234567890" and "api-key" not in entra._headers
    assert entra._redact("a tok-1234567890 b") == "a *** b"  # a token is a secret like a key
    with pytest.raises(EvalkitError, match=r"AZURE_OPENAI_API_KEY is not set .*AZURE_OPENAI_AD_TOKEN"):
        create_provider(spec, {})


def test_openrouter_models_keep_their_vendor_and_its_reasoning_switch_is_one_object():
    spec = parse_spec("openrouter/anthropic/claude-sonnet-4.5")
    assert (spec.provider, spec.model, spec.endpoint) == ("openrouter", "anthropic/claude-sonnet-4.5", "")
    client = create_provider(spec, {"OPENROUTER_API_KEY": "or-k"})
    assert client.pool.replicas[0].url == "https://openrouter.ai/api/v1"
    assert client._headers["Authorization"] == "Bearer or-k" and client._headers["X-Title"] == "evalkit"
    assert chat_fields("openrouter", spec.model, GenParams(reasoning_effort="high")) == {
        "reasoning": {"effort": "high"}}
    assert chat_fields("openrouter", spec.model, GenParams(thinking_budget=2048)) == {"reasoning": {"max_tokens": 2048}}
    assert chat_fields("openrouter", spec.model, GenParams(reasoning_effort="none")) == {"reasoning": {"enabled": False}}
    assert chat_fields("azure", "o3-dep", GenParams(reasoning_effort="low")) == {"reasoning_effort": "low"}


def test_a_routed_model_gets_its_vendors_image_limits():
    assert limits_for("openrouter", "anthropic/claude-sonnet-4.5").name == "anthropic"
    assert limits_for("openrouter", "google/gemini-2.5-pro").name == "google"
    assert limits_for("openrouter", "meta-llama/llama-3.2-90b-vision").name == "openrouter"  # as they are
    assert limits_for("azure", "anything").name == "azure"


def test_error_kinds_an_account_out_of_credit_a_content_filter_and_the_rest():
    assert error_kind(402, b'{"error": {"code": 402, "message": "Insufficient credits"}}') == "exhausted"
    assert error_kind(429, b'{"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}') == "exhausted"
    assert error_kind(429, b'{"error": {"code": "rate_limit_exceeded"}}') == "rate_limit"
    assert error_kind(400, b'{"error": {"code": "content_filter", "innererror": {}}}') == "refused"
    assert error_kind(400, b"not json") == "permanent" and error_kind(503, b"") == "transient"


def test_the_cost_a_reply_reports_is_its_cost():
    body = {"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}], "model": "openai/gpt-4o",
            "provider": "Azure", "usage": {"prompt_tokens": 100, "completion_tokens": 2, "cost": 0.00027}}
    reply = response_from_openai(body, reports_cost=True)
    assert reply.usage.cost_usd == 0.00027 and reply.served_by == "openai/gpt-4o · via Azure"
    assert response_from_openai(body).usage.cost_usd is None  # only where the provider is known to report it
    for bad in (-1, "0.1", math.inf, True, None):
        assert response_from_openai({**body, "usage": {**body["usage"], "cost": bad}}, reports_cost=True
                                    ).usage.cost_usd is None
    assert Usage(1, 2).to_dict() == {"input_tokens": 1, "output_tokens": 2, "cached_input_tokens": 0,
                                     "reasoning_tokens": 0}  # every other record and cache value as before
    assert Usage.from_dict(Usage(1, 2, cost_usd=0.5).to_dict()).cost_usd == 0.5


def _record(usage: dict, **kw) -> Record:
    return Record(query_id="q", item_id="q", base_id="q", variant={}, model="m", request_key="k", response="A",
                  gold="A", usage=usage, **kw)


def test_a_runs_cost_sums_what_was_reported_even_without_a_price():
    paid = _record({"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.25})
    cached = _record({"input_tokens": 10, "output_tokens": 1, "cost_usd": 0.25}, cached=True)
    assert record_cost(None, paid) == 0.25 and records_cost(None, [paid, cached, paid]) == 0.5
    assert records_cost(None, [_record({"input_tokens": 10})]) is None  # neither a price nor a report
    assert Record.from_dict(paid.to_dict()).usage["cost_usd"] == 0.25
    with pytest.raises(ValueError, match="usage has the wrong type"):
        Record.from_dict({**paid.to_dict(), "usage": {"input_tokens": 1.5}})


def test_a_dry_run_prices_a_routed_model_at_its_vendors_price_and_azure_from_the_users_file(tmp_path):
    table = load_prices()
    routed = table.price_for("openrouter", "openai/gpt-4o")
    assert routed is not None and routed.input_per_m == table.lookup("openai", "gpt-4o").input_per_m
    assert "passes openai's price through" in routed.note
    assert table.price_for("openrouter", "meta-llama/llama-3.2-90b-vision") is None
    assert table.price_for("azure", "my-gpt4o") is None
    prices = tmp_path / "prices.json"
    prices.write_text('{"azure/my-gpt4o": {"input": 2.5, "output": 10}, '
                      '"openrouter/openai/gpt-4o": {"input": 3, "output": 12}}')
    table = load_prices(prices)
    assert table.price_for("azure", "my-gpt4o").output_per_m == 10.0
    assert table.price_for("openrouter", "openai/gpt-4o").input_per_m == 3.0  # its own entry first


def test_openrouter_rate_headers_say_what_is_left_and_when():
    info = rate_info({"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1000004000"},
                     now=1_000_000.0)
    assert info.requests_left == 0 and info.requests_reset_s == pytest.approx(4.0)
    assert info.requests_per_min is None  # a window it does not name: no rate is learned from it


def test_the_preflight_checks_azures_key_not_its_deployment_and_openrouters_credit():
    azure = ProviderSpec("azure", "my-dep", ("https://res.openai.azure.com/openai/v1",))
    assert _request(azure, azure.base_urls[0], "k", {"OPENAI_API_VERSION": "2024-10-21"}) == (
        "https://res.openai.azure.com/openai/models?api-version=2024-10-21", {"api-key": "k"})
    assert _request(azure, azure.base_urls[0], "k", {})[0] == "https://res.openai.azure.com/openai/v1/models"
    base_models = {"data": [{"id": "gpt-4o"}, {"id": "gpt-4.1"}]}
    assert judge_reply(azure, 200, base_models) == (None, False)  # the deployment is never looked for there
    assert judge_reply(azure, 401, {})[0] == "HTTP 401: the API key was refused"
    assert judge_reply(azure, 401, {}, keyed=False) == (None, False)  # an Entra token the probe does not carry
    router = ProviderSpec("openrouter", "openai/gpt-4o")
    assert _request(router, "https://openrouter.ai/api/v1", "k", {}) == (
        "https://openrouter.ai/api/v1/key", {"Authorization": "Bearer k"})
    assert judge_reply(router, 200, {"data": {"limit": 5, "limit_remaining": 1.5}}) == (None, False)
    assert judge_reply(router, 200, {"data": {"limit": None, "limit_remaining": None}}) == (None, False)
    assert "credit limit is spent" in judge_reply(router, 200, {"data": {"limit": 5, "limit_remaining": 0}})[0]
    assert judge_reply(router, 401, {})[0] == "HTTP 401: the API key was refused"
