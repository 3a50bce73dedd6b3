"""One row per query: what was asked of which model, what it answered, how that was judged, and at
what latency, tokens and cost. The CSV and JSON Lines exports write these rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from evalkit.core.usage import Usage
from evalkit.export.runs import ExportRun
from evalkit.money.costs import record_cost

# in this order in the CSV header; JSON Lines rows hold the same keys
COLUMNS = ("run", "benchmark", "model", "question_id", "query_id", "variant", "repeat", "category",
           "raw_answer", "parsed_answer", "gold", "correct", "parse_method", "refusal", "error",
           "error_message", "finish_reason", "latency_s", "input_tokens", "output_tokens",
           "cached_input_tokens", "reasoning_tokens", "cached", "cost_usd", "served_by")


def query_rows(runs: Iterable[ExportRun]) -> Iterator[dict[str, Any]]:
    """Every run's queries, run by run, in the order of its records.jsonl."""
    for run in runs:
        price = run.price
        for r in run.records:
            usage = Usage.from_dict(r.usage)
            yield {
                "run": run.name, "benchmark": run.benchmark, "model": r.model, "question_id": r.item_id,
                "query_id": r.query_id, "variant": dict(r.variant), "repeat": r.repeat, "category": r.category,
                "raw_answer": r.response, "parsed_answer": r.parsed, "gold": r.gold, "correct": r.correct,
                "parse_method": r.parse_method, "refusal": r.refusal, "error": r.error,
                "error_message": r.error_message, "finish_reason": r.finish_reason, "latency_s": r.latency_s,
                "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                "cached_input_tokens": usage.cached_input_tokens, "reasoning_tokens": usage.reasoning_tokens,
                "cached": r.cached, "cost_usd": record_cost(price, r), "served_by": r.served_by,
            }
