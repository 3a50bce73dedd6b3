"""Answers cut off while thinking: a distinct outcome, final (never retried), cached, counted apart.

A reasoning model that spends its whole output budget thinking returns no answer with a token-limit
finish reason. The runner must not retry it (the same request ends the same way), must cache it (a
re-run pays nothing), grading must count it as `cutoffs`, not `unparsed`, and never show its
thinking to an extractor in robust mode.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.store.cache import ResponseCache
from evalkit.benchmarks import get_benchmark
from evalkit.core.record import Record
from evalkit.core.types import GenParams, Message, Query, Response, Usage, is_cut_off
from evalkit.engine.cutoffs import check_budget, split_options, to_reask, with_budget
from evalkit.grading.grade import grade, needs_judge, summarize
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.basic import outcome_counts
from evalkit.providers.base import ProviderSpec


@pytest.mark.parametrize(("text", "finish", "cut"), [
    ("", "length", True),  # OpenAI / vLLM: the thinking was hidden or came apart
    (None, "max_tokens", True),  # Anthropic
    ("", "MAX_TOKENS", True),  # Gemini
    ("<think>\nfirst, the red car", "length", True),  # vLLM without a reasoning parser: unclosed
    ("  <THINK>the car </think>  ", "length", True),  # closed, but nothing after it
    ("<think>the car</think> B", "length", False),  # an answer came before the limit
    ("The answer is B, because", "length", False),  # cut mid-answer: read what is there
    ("", "stop", False),  # an empty answer that ended on its own: not a cut-off
    ("<think>hm", None, False),
])
def test_what_counts_as_cut_off(text, finish, cut):
    assert is_cut_off(text, finish) is cut


class _Thinker:
    """A provider whose every reply is `reply`, counting requests."""

    def __init__(self, reply: Response) -> None:
        self.spec = ProviderSpec("vllm", "m", ("http://127.0.0.1:9/v1",))
        self.reply = reply
        self.sent = 0

    async def complete(self, messages, params, images):  # noqa: ANN001, ANN201
        self.sent += 1
        return self.reply

    def describe_params(self, params):  # noqa: ANN001, ANN201
        return params.to_dict()

    async def close(self) -> None:
        return None


def _ask(cache_dir: Path, reply: Response, n: int = 3) -> tuple[list, _Thinker]:
    provider, cache, pipeline = _Thinker(reply), ResponseCache(cache_dir), ImagePipeline()
    queries = [Query(f"q{i}", f"q{i}", f"q{i}", {}, (Message.user(f"Question {i}?"),), "A") for i in range(n)]
    runner = Runner(provider, limiter=Limiter(concurrency=4), cache=cache, pipeline=pipeline,
                    policy=RetryPolicy(max_attempts=4, initial_s=0.001, max_s=0.001))
    outcomes: list = []
    try:
        asyncio.run(runner.run(queries, outcomes.append, workers=4))
    finally:
        cache.close()
        pipeline.close()
    return outcomes, provider


def test_a_cut_off_is_final_and_cached_an_empty_answer_is_retried_and_not(tmp_path):
    cut = Response(text="", finish_reason="length", usage=Usage(50, 256, reasoning_tokens=256))
    outcomes, provider = _ask(tmp_path / "a", cut)
    assert provider.sent == 3  # one request per query: never retried
    assert all(o.response.ok and o.response.finish_reason == "length" and not o.cached for o in outcomes)
    again, provider = _ask(tmp_path / "a", cut)
    assert provider.sent == 0 and all(o.cached and o.response.finish_reason == "length" for o in again)
    assert again[0].response.usage.reasoning_tokens == 256

    empty = Response(text="", finish_reason="stop")
    outcomes, provider = _ask(tmp_path / "b", empty)
    assert provider.sent == 3 * 4  # retried to the last attempt, and then it is the answer
    again, provider = _ask(tmp_path / "b", empty)
    assert provider.sent == 12  # not cached: a later run tries again


def _record(response: str, finish: str | None, qid: str = "q1") -> Record:
    return Record(query_id=qid, item_id=qid, base_id=qid, variant={}, model="m", request_key="k", response=response,
                  gold="B", finish_reason=finish)


def _query(qid: str = "q1") -> Query:
    return Query(qid, qid, qid, {}, (Message.user("Which? A. x B. y"),), "B", options={"A": "x", "B": "y"})


@pytest.mark.parametrize("mode", ["official", "robust"])
def test_cut_offs_are_counted_apart_from_unparsed_and_never_judged(mode):
    bench = get_benchmark("mcq")
    graded = [grade(bench, _query(), _record(text, finish), mode) for text, finish in [
        ("", "length"), ("<think>\nthe answer may be", "length"), ("no idea", "stop"), ("B", "stop"),
        ("<think>x</think>A", "length")]]
    assert [r.correct for r in graded] == [False, False, False, True, False]
    assert outcome_counts(graded) == {"correct": 1, "wrong": 1, "unparsed": 1, "errors": 0, "refusals": 0, "cutoffs": 2}
    assert [needs_judge(r) for r in graded[:2]] == [False, mode == "official"]  # official: as the official code
    if mode == "robust":
        assert {r.parse_method for r in graded[:2]} == {"cutoff"} and graded[1].parsed is None


def test_the_summary_counts_cut_offs_and_says_what_to_do():
    bench = get_benchmark("mcq")
    cut = [replace(_record("", "length", f"q{i}"), usage={"output_tokens": 512}) for i in range(3)]
    records = [grade(bench, _query(r.query_id), r, "official") for r in cut]
    records.append(grade(bench, _query("q3"), _record("B", "stop", "q3"), "official"))
    summary = summarize(bench, records, model="m", mode="official", n_items=4, n_queries=4, options={},
                        config={"generation_sent": {"max_tokens": 512}}, judge=None)
    assert summary["counts"]["cutoffs"] == 3 and summary["counts"]["unparsed"] == 0
    assert summary["metrics"]["accuracy"] == pytest.approx(25.0)
    assert "3 answers were cut off while thinking" in summary["hint"]
    assert "--reask-cutoffs --max-tokens 2048" in summary["hint"]


def test_reask_budget_rules():
    assert split_options({"max_tokens": 4096, "seed": 1}) == ({"max_tokens": 4096, "seed": 1}, None)
    assert split_options({"max_tokens": 4096, "reask_cutoffs": True}) == ({"reask_cutoffs": True}, 4096)
    with pytest.raises(Exception, match="--reask-cutoffs needs --max-tokens"):
        split_options({"reask_cutoffs": True})
    q = replace_params(_query(), 1024)
    with pytest.raises(Exception, match="must be larger than the run's own max_tokens \\(1024\\)"):
        check_budget(1024, [q])
    assert with_budget(q, 4096).params.max_tokens == 4096 and with_budget(q, None) is q
    current = {"a": _record("", "length", "a"), "b": _record("B", "stop", "b"),
               "c": Record(**{**_record("", "length", "c").__dict__, "max_tokens": 4096})}
    assert to_reask(current, 4096) == ["a"]  # c was already asked with 4096
    assert sorted(to_reask(current, 8192)) == ["a", "c"]


def replace_params(query: Query, max_tokens: int) -> Query:
    from dataclasses import replace

    return replace(query, params=GenParams(max_tokens=max_tokens))


# ---- end to end: the simulated model thinks (evalkit sim --think-tokens) -----------------------

N = 8


def _sim(data: Path, think: int):  # noqa: ANN202
    from evalkit.sim.from_bench import answer_key_for
    from evalkit.sim.model import SimParams
    from evalkit.sim.server import SimConfig, SimThread

    key = answer_key_for("mcq", {"data": str(data)})
    return SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.9, seed=3), think_tokens=think))


def _run(sim, data: Path, tmp: Path, provider: str, *extra: str):  # noqa: ANN001, ANN202
    from cli_under_test import run_main
    from provider_runs import pointed_at

    args, env = pointed_at(provider, sim.url)
    return run_main(["run", "mcq", "--model", f"{provider}/sim-model", "--data", str(data), "--out", str(tmp / "run"),
                    "--cache-dir", str(tmp / "cache"), "--no-progress", "--no-plots", *args, *extra], env=env)


def _requests(sim) -> int:  # noqa: ANN001
    return sim.counters.snapshot()["requests"]


def _read(run: Path) -> tuple[dict, list[dict]]:
    import json

    summary = json.loads((run / "summary.json").read_text())
    return summary, [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("provider", ["vllm", "openai", "anthropic"])
def test_cut_offs_end_to_end_then_reask_only_those(tmp_path, provider):
    from synthetic_data import make_mcq_jsonl

    data = make_mcq_jsonl(tmp_path / "ds", N, seed=61)
    think = ("--thinking-budget", "1024") if provider == "anthropic" else ("--reasoning-effort", "high")
    run = tmp_path / "run"
    with _sim(data, think=1500) as sim:  # each question thinks 750..2250 tokens
        first = _run(sim, data, tmp_path, provider, *think, "--max-tokens", "400")
        summary, records = _read(run)
        sent_cut = sim.counters.snapshot()["cutoffs"]
        # Anthropic's max_tokens is raised above the thinking budget (1024 + 400): some answer
        cut = [r for r in records if r["finish_reason"] in ("length", "max_tokens")]
        assert first.returncode == 0, first.stderr
        assert summary["counts"]["cutoffs"] == len(cut) == sent_cut > 0
        assert summary["counts"]["unparsed"] == 0 and summary["counts"]["errors"] == 0
        assert _requests(sim) == N  # one request per query: a cut-off is never retried
        assert "--reask-cutoffs --max-tokens" in summary["hint"] and "cut off while thinking" in first.stdout
        assert all(r["correct"] is False and r["parsed"] is None for r in cut)

        assert _run(sim, data, tmp_path, provider, *think, "--max-tokens", "400").returncode == 0
        assert _requests(sim) == N  # cached and recorded: nothing is sent again

        again = _run(sim, data, tmp_path, provider, *think, "--reask-cutoffs", "--max-tokens", "4000")
        assert again.returncode == 0, again.stderr
        assert _requests(sim) == N + len(cut)  # exactly the cut-off ones
        summary2, records2 = _read(run)
        assert summary2["counts"]["cutoffs"] == 0 and summary2["reask_cutoffs"] == {"max_tokens": 4000,
                                                                                    "queries": len(cut)}
        budgets = {r["query_id"]: r.get("max_tokens") for r in records2}
        assert {q for q, b in budgets.items() if b == 4000} == {r["query_id"] for r in cut}
        assert summary2["counts"]["correct"] > summary["counts"]["correct"]
        assert len(records2) == N

        if provider != "vllm":  # the resume below is the same code for every provider
            return
        for argv in ([*think, "--max-tokens", "400"], [*think, "--reask-cutoffs", "--max-tokens", "4000"]):
            assert _run(sim, data, tmp_path, provider, *argv).returncode == 0
            assert _requests(sim) == N + len(cut)  # both commands find everything answered
        assert _read(run)[0]["counts"] == summary2["counts"]


def test_reask_cutoffs_needs_a_larger_budget_and_the_run(tmp_path):
    from synthetic_data import make_mcq_jsonl

    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=62)
    with _sim(data, think=1500) as sim:
        no_budget = _run(sim, data, tmp_path, "vllm", "--reask-cutoffs")
        assert no_budget.returncode == 2 and "--reask-cutoffs needs --max-tokens N" in no_budget.stderr
        no_run = _run(sim, data, tmp_path, "vllm", "--reask-cutoffs", "--max-tokens", "4000")
        assert no_run.returncode == 2 and "no run directory holds this run" in no_run.stderr
        assert _run(sim, data, tmp_path, "vllm", "--reasoning-effort", "high", "--max-tokens", "300").returncode == 0
        small = _run(sim, data, tmp_path, "vllm", "--reasoning-effort", "high", "--reask-cutoffs", "--max-tokens", "300")
        assert small.returncode == 2 and "must be larger than the run's own max_tokens (300)" in small.stderr
        assert _requests(sim) == 4
