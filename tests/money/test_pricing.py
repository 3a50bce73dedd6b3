"""Prices: the dated table, name matching, user overrides, and usage -> dollars with exact numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Usage
from evalkit.money.pricing import Price, cost_usd, estimate_cost, load_prices, price_of, reasoning_included

M = 1_000_000


@pytest.fixture(scope="module")
def table():
    return load_prices()


def test_gpt4o_exact_numbers(table):
    p = table.lookup("openai", "gpt-4o")
    assert (p.input_per_m, p.cached_input_per_m, p.output_per_m) == (2.50, 1.25, 10.00)
    assert cost_usd(p, Usage(input_tokens=M, output_tokens=M // 2)) == pytest.approx(2.50 + 5.00, abs=1e-12)
    assert estimate_cost(p, M, M // 2) == pytest.approx(7.50, abs=1e-12)


def test_cached_tokens_are_part_of_input_and_billed_at_the_cached_rate(table):
    p = table.lookup("openai", "gpt-4o")
    usage = Usage(input_tokens=M, cached_input_tokens=400_000, output_tokens=0)
    assert cost_usd(p, usage) == pytest.approx(600_000 * 2.50 / M + 400_000 * 1.25 / M, abs=1e-12)  # $2.00
    assert cost_usd(p, usage) == pytest.approx(2.00, abs=1e-12)
    # a provider that reports more cached than total never produces a negative fresh count
    assert cost_usd(p, Usage(input_tokens=10, cached_input_tokens=50)) == pytest.approx(10 * 1.25 / M)


def test_unverified_cached_rate_bills_cached_tokens_as_input(table):
    p = table.lookup("google", "gemini-2.5-flash")
    assert p.cached_input_per_m is None
    assert cost_usd(p, Usage(input_tokens=M, cached_input_tokens=M)) == pytest.approx(0.30, abs=1e-12)


def test_reasoning_rule_per_provider(table):
    # OpenAI: completion_tokens already include reasoning tokens -> not added again
    o3 = table.lookup("openai", "o3")
    assert cost_usd(o3, Usage(output_tokens=M, reasoning_tokens=800_000)) == pytest.approx(8.00, abs=1e-12)
    # Gemini: thoughts are billed as output but not in candidates_token_count -> added
    pro = table.lookup("google", "gemini-2.5-pro")
    usage = Usage(input_tokens=M, cached_input_tokens=0, output_tokens=100_000, reasoning_tokens=900_000)
    assert cost_usd(pro, usage) == pytest.approx(1.25 + 10.00, abs=1e-12)
    # the rule is an explicit argument when the caller knows better
    assert cost_usd(pro, usage, reasoning_in_output=True) == pytest.approx(1.25 + 1.00, abs=1e-12)
    assert cost_usd(o3, Usage(output_tokens=M, reasoning_tokens=M), reasoning_in_output=False) == pytest.approx(16.0)
    assert [reasoning_included(p) for p in ("openai", "anthropic", "google", "vllm", "other")] == \
        [True, True, False, True, True]


def test_anthropic_and_google_numbers(table):
    sonnet = table.lookup("anthropic", "claude-sonnet-4-5-20250929")
    assert (sonnet.input_per_m, sonnet.cached_input_per_m, sonnet.output_per_m) == (3.0, 0.30, 15.0)
    assert cost_usd(sonnet, Usage(input_tokens=2 * M, cached_input_tokens=M, output_tokens=M)) == \
        pytest.approx(3.0 + 0.30 + 15.0, abs=1e-12)
    haiku = table.lookup("anthropic", "claude-3-5-haiku-20241022")
    assert cost_usd(haiku, Usage(input_tokens=M, output_tokens=M)) == pytest.approx(0.80 + 4.00, abs=1e-12)
    lite = table.lookup("google", "gemini-2.5-flash-lite")
    assert estimate_cost(lite, 10 * M, M) == pytest.approx(1.00 + 0.40, abs=1e-12)
    assert "200k" in table.lookup("google", "gemini-2.5-pro").note


@pytest.mark.parametrize(("provider", "model", "name"), [
    ("openai", "gpt-4o-2024-08-06", "gpt-4o"),
    ("openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("openai", "gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("openai", "o4-mini-2025-04-16", "o4-mini"),
    ("anthropic", "claude-opus-4-1-20250805", "claude-opus-4-1"),
    ("anthropic", "claude-opus-4-20250514", "claude-opus-4"),
    ("anthropic", "claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("anthropic", "claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ("google", "gemini-2.0-flash-001", "gemini-2.0-flash"),
    ("google", "models/gemini-2.5-flash", "gemini-2.5-flash"),
])
def test_prefix_matching_follows_snapshot_suffixes(table, provider, model, name):
    assert table.lookup(provider, model) == table.prices[provider][name]


def test_different_models_sharing_a_prefix_are_not_guessed(table):
    assert table.lookup("openai", "gpt-4o-2024-05-13").input_per_m == 5.00  # exact entry beats the prefix
    assert table.lookup("anthropic", "claude-opus-4-5-20251101").input_per_m == 5.00  # not Opus 4's $15
    for provider, model in [("openai", "gpt-5-nano"), ("openai", "gpt-5-pro"), ("openai", "o3-mini"),
                            ("openai", "gpt-4.1-nano"), ("openai", "gpt-4o-realtime-preview"),
                            ("google", "gemini-2.0-flash-lite"), ("google", "gemini-2.5-flash-image"),
                            ("anthropic", "claude-opus-4-9"), ("openai", "nonexistent")]:
        assert table.lookup(provider, model) is None, model


def test_unknown_is_none_never_a_guess(table):
    assert table.lookup("vllm", "Qwen/Qwen2.5-VL-7B-Instruct") is None
    assert table.lookup("openai-compatible", "gpt-4o") is None  # a local server, not OpenAI's price
    assert table.lookup("nobody", "gpt-4o") is None
    assert cost_usd(None, Usage(input_tokens=5)) is None
    assert estimate_cost(None, 5, 5) is None


def test_every_builtin_price_is_dated_and_sourced(table):
    for provider in ("openai", "anthropic", "google"):
        assert table.names(provider)
        for name in table.names(provider):
            p = table.prices[provider][name]
            assert p.source.startswith("https://") and p.read_on == "2026-11-22" and p.provider == provider
            assert p.input_per_m > 0 and p.output_per_m >= p.input_per_m
            assert p.cached_input_per_m is None or p.cached_input_per_m < p.input_per_m
    wanted = {"openai": ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-5", "gpt-5-mini", "o3", "o4-mini"],
              "anthropic": ["claude-sonnet-4", "claude-sonnet-4-5", "claude-opus-4", "claude-opus-4-1",
                            "claude-haiku-4-5", "claude-3-5-haiku"],
              "google": ["gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite", "gemini-2.0-flash"]}
    for provider, names in wanted.items():
        assert set(names) <= set(table.names(provider))
    json.dumps(table.lookup("openai", "gpt-4o").__dict__)  # the run config stores it as JSON


def _write(tmp_path: Path, data: object, name: str = "prices.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_user_file_overrides_and_extends(tmp_path):
    path = _write(tmp_path, {
        "openai/gpt-4o": {"input": 2, "output": 8, "cached_input": 1},
        "vllm/Qwen/Qwen2.5-VL-7B-Instruct": {"input": 0.1, "output": 0.2, "source": "our GPU bill", "read_on": "2026-11-01"},
    })
    table = load_prices(path)
    p = table.lookup("openai", "gpt-4o-2024-08-06")  # prefix matching applies to user entries too
    assert p == Price(2.0, 8.0, 1.0, str(path), "user file", "openai")
    assert cost_usd(p, Usage(input_tokens=M, output_tokens=M)) == pytest.approx(10.0, abs=1e-12)
    q = table.lookup("vllm", "Qwen/Qwen2.5-VL-7B-Instruct")
    assert (q.input_per_m, q.output_per_m, q.cached_input_per_m, q.source, q.read_on) == \
        (0.1, 0.2, None, "our GPU bill", "2026-11-01")
    assert table.lookup("openai", "gpt-4o-mini").input_per_m == 0.15  # the rest of the built-ins stay
    assert load_prices().lookup("openai", "gpt-4o").input_per_m == 2.50  # and nothing leaks between tables


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", r"price file .*prices\.json: not valid JSON"),
    ([1, 2], r"price file .*prices\.json: expected an object"),
    ({"gpt-4o": {"input": 1, "output": 2}}, r"entry 'gpt-4o' must be named provider/model"),
    ({"openai/x": 3}, r"entry 'openai/x': expected an object"),
    ({"openai/x": {"output": 2}}, r"entry 'openai/x': 'input' .* is required"),
    ({"openai/x": {"input": 1}}, r"entry 'openai/x': 'output' .* is required"),
    ({"openai/x": {"input": "1", "output": 2}}, r"entry 'openai/x': 'input' must be a non-negative number, got '1'"),
    ({"openai/x": {"input": -1, "output": 2}}, r"'input' must be a non-negative number, got -1"),
    ({"openai/x": {"input": 1, "output": True}}, r"'output' must be a non-negative number, got True"),
    ({"openai/x": {"input": 1, "output": 2, "cached": 1}}, r"entry 'openai/x': unknown field\(s\) cached"),
    ({"openai/x": {"input": 1, "output": 2, "source": 5}}, r"entry 'openai/x': 'source' must be a string"),
])
def test_bad_user_file_names_the_file_and_the_entry(tmp_path, content, message):
    path = _write(tmp_path, content)
    with pytest.raises(EvalkitError, match=message):
        load_prices(path)


def test_missing_user_file(tmp_path):
    with pytest.raises(EvalkitError, match=r"cannot read price file .*nope\.json"):
        load_prices(tmp_path / "nope.json")


def test_batch_answers_cost_the_documented_half(table):
    price = table.lookup("openai", "gpt-4o")
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd(price_of(price, "batch"), usage) == pytest.approx(cost_usd(price, usage) / 2)
    assert price_of(price, None) is price and price_of(None, "batch") is None


def test_a_price_file_may_give_batch_rates_and_otherwise_gets_the_discount(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai/own": {"input": 2, "output": 8, "batch_input": 1.5},
                                "anthropic/other": {"input": 4, "output": 20}}))
    table = load_prices(path)
    own = table.lookup("openai", "own").batch()
    assert (own.input_per_m, own.output_per_m) == (1.5, 4.0)  # given batch input; output at the discount
    other = table.lookup("anthropic", "other").batch()
    assert (other.input_per_m, other.output_per_m) == (2.0, 10.0)


def test_records_cost_bills_batch_answers_at_the_batch_price(table):
    from evalkit.core.record import Record
    from evalkit.money.costs import records_cost

    price = table.lookup("openai", "gpt-4o")
    usage = Usage(input_tokens=M, output_tokens=0).to_dict()
    live = Record("q1", "i", "i", {}, "openai/gpt-4o", "k1", "A", "A", usage=usage)
    batch = Record("q2", "i", "i", {}, "openai/gpt-4o", "k2", "A", "A", usage=usage, via="batch")
    assert records_cost(price, [live, batch]) == pytest.approx(2.50 + 1.25)
    assert "via" not in live.to_dict() and Record.from_dict(batch.to_dict()).via == "batch"
