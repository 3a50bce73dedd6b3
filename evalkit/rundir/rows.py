"""One row per query, as plain values: which question, which variant, which model, what it answered,
how that was judged, the latency, tokens and cost, and who served it (the snapshot, the service tier).
`RunResult.to_rows()` returns these rows; the keys are those of `evalkit export --to csv|jsonl`, so a
notebook and an export agree."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from evalkit.core.record import Record
from evalkit.core.usage import Usage
from evalkit.money.costs import list_cost, record_cost
from evalkit.money.pricing import Price

COLUMNS = ("run", "benchmark", "model", "question_id", "query_id", "variant", "repeat", "category",
           "raw_answer", "parsed_answer", "gold", "correct", "parse_method", "refusal", "error",
           "error_message", "finish_reason", "latency_s", "input_tokens", "output_tokens",
           "cached_input_tokens", "reasoning_tokens", "cached", "cost_usd", "list_cost_usd", "served_by",
           "served_tier")


def query_row(r: Record, price: Price | None, *, run: str, benchmark: str) -> dict[str, Any]:
    """The row of one record: cost_usd what the answer cost when it was asked (0 from the cache), list_cost_usd
    what it costs at list price whoever paid; None where no price is known (and the provider said none)."""
    usage = Usage.from_dict(r.usage)
    return {
        "run": run, "benchmark": benchmark, "model": r.model, "question_id": r.item_id,
        "query_id": r.query_id, "variant": dict(r.variant), "repeat": r.repeat, "category": r.category,
        "raw_answer": r.response, "parsed_answer": r.parsed, "gold": r.gold, "correct": r.correct,
        "parse_method": r.parse_method, "refusal": r.refusal, "error": r.error,
        "error_message": r.error_message, "finish_reason": r.finish_reason, "latency_s": r.latency_s,
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens, "reasoning_tokens": usage.reasoning_tokens,
        "cached": r.cached, "cost_usd": record_cost(price, r), "list_cost_usd": list_cost(price, r),
        "served_by": r.served_by, "served_tier": r.served_tier,
    }


def query_rows(records: Iterable[Record], price: Price | None, *, run: str, benchmark: str) -> list[dict[str, Any]]:
    return [query_row(r, price, run=run, benchmark=benchmark) for r in records]


def price_in(config: Mapping[str, Any]) -> Price | None:
    """The price a run's config.json / summary `config` recorded (None: unknown or unreadable)."""
    given = config.get("price")
    if not isinstance(given, Mapping):
        return None
    names = {f.name for f in dataclasses.fields(Price)}
    try:
        return Price(**{k: v for k, v in given.items() if k in names})
    except TypeError:
        return None
