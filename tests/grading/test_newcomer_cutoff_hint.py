"""The --reask-cutoffs hint suggests a budget the cut-off answers have not already had (issue 35 item 2).

It used to say four times the run's max_tokens as sent: under --reasoning-effort high (a 16,384-token
thinking budget) with --max-tokens 64 that is 256, which cuts every answer off again, and the re-run
printed the same hint. The suggestion is now the next power of two above twice the most output tokens a
cut-off answer used and above every budget it had (max_tokens sent, thinking budget or effort, re-ask).
"""

from __future__ import annotations

from evalkit.benchmarks import get_benchmark
from evalkit.core.record import Record
from evalkit.core.types import Message, Query
from evalkit.grading.grade import grade, reask_budget, summarize


def _cut(qid: str, used: int, *, reasoning: int = 0, asked_with: int | None = None) -> Record:
    return Record(query_id=qid, item_id=qid, base_id=qid, variant={}, model="m", request_key="k", response="",
                  gold="B", finish_reason="length", max_tokens=asked_with,
                  usage={"input_tokens": 50, "output_tokens": used, "reasoning_tokens": reasoning})


def _summary(records: list[Record], sent: dict) -> dict:
    bench = get_benchmark("mcq")
    query = {r.query_id: Query(r.query_id, r.query_id, r.query_id, {}, (Message.user("Which? A. x B. y"),), "B",
                               options={"A": "x", "B": "y"}) for r in records}
    graded = [grade(bench, query[r.query_id], r, "official") for r in records]
    return summarize(bench, graded, model="m", mode="official", n_items=len(graded), n_queries=len(graded),
                     options={}, config={"generation_sent": sent}, judge=None)


def test_reasoning_effort_high_is_suggested_more_than_its_thinking_budget():
    sent = {"max_tokens": 64, "reasoning_effort": "high"}  # OpenAI: all 64 tokens spent thinking
    summary = _summary([_cut(f"q{i}", 64, reasoning=64) for i in range(3)], sent)
    assert summary["counts"]["cutoffs"] == 3
    assert "3 answers were cut off while thinking" in summary["hint"]
    assert "--reask-cutoffs --max-tokens 32768`" in summary["hint"]  # above 16,384; 0.3.0.dev0 said 256


def test_the_hint_after_a_re_ask_that_stayed_cut_off_asks_for_more():
    sent = {"max_tokens": 64, "reasoning_effort": "high"}
    first = reask_budget([_cut("q1", 64)], {"generation_sent": sent})
    again = [_cut("q1", first, asked_with=first), _cut("q2", 900, asked_with=first)]
    second = reask_budget(again, {"generation_sent": sent})
    assert (first, second) == (32768, 131072)  # above 2 × 32,768 used
    assert "--max-tokens 131072`" in _summary(again, sent)["hint"]


def test_each_providers_budget_and_usage_counts():
    anthropic = {"max_tokens": 16448, "thinking": {"type": "enabled", "budget_tokens": 16384}}
    assert reask_budget([_cut("q", 16448)], {"generation_sent": anthropic}) == 65536
    gemini = {"max_tokens": 1024, "thinking_budget": 8192}  # thoughts counted apart from the answer's tokens
    assert reask_budget([_cut("q", 0, reasoning=8192)], {"generation_sent": gemini}) == 32768
    assert reask_budget([_cut("q", 0)], {"generation_sent": {"max_tokens": 1000}}) == 1024
    assert reask_budget([_cut("q", 300)], {}) == 1024  # no config: from what the answer used alone
