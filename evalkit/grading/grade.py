"""From responses to verdicts: rule parsing, the optional LLM extractor, counts and the summary.

Pure functions except `judge_records`, which asks the judge model through a Runner
(and therefore through the same cache, limiter and retries as everything else).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from evalkit.ask.runner import Runner
from evalkit.core.record import Parsed, Record
from evalkit.core.types import DATA_ERROR, GenParams, Message, Outcome, Query
from evalkit.core.version import __version__
from evalkit.grading.extract import JudgeRequest
from evalkit.grading.failures import data_digest, digest
from evalkit.metrics.basic import outcome, outcome_counts, usage_totals
from evalkit.providers.reasoning import EFFORT_BUDGETS

JUDGE_PARAMS = GenParams(temperature=0.0, max_tokens=64)


class Tracker(Protocol):
    """Progress of the judge phase (report.progress.RunProgress): entered, advanced per outcome."""

    def advance(self, outcome: Outcome) -> None: ...

    def __enter__(self) -> Tracker: ...

    def __exit__(self, *exc: object) -> None: ...


class BenchmarkRules(Protocol):
    """What grading needs of a benchmark (evalkit.benchmarks.base.Benchmark provides it); declared
    here so grading sits below the benchmarks that use its parsers."""

    @property
    def name(self) -> str: ...

    def parse(self, query: Query, text: str, mode: str) -> Parsed: ...

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None: ...

    def judge_verdict(self, query: Query, response: str, reply: str, valid: Sequence[str], mode: str) -> Parsed: ...

    def score(self, query: Query, parsed: Parsed) -> bool | None: ...

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]: ...


def make_record(outcome: Outcome, model: str) -> Record:
    q, r = outcome.query, outcome.response
    return Record(
        query_id=q.id, item_id=q.item_id, base_id=q.base_id, variant=q.variant, model=model,
        request_key=outcome.request_key, response=r.text if r.ok else None, gold=q.gold,
        error=r.error, error_message=r.error_message, usage=r.usage.to_dict(), latency_s=round(r.latency_s, 4),
        cached=outcome.cached, finish_reason=r.finish_reason, category=q.category,
        prompt=q.prompt_text(), image_fps=outcome.image_fps, image_sizes=outcome.image_sizes, via=r.via,
        served_by=r.served_by, served_tier=r.served_tier,
    )


def grade(bench: BenchmarkRules, query: Query, record: Record, mode: str) -> Record:
    """Rule-parse and score one record. Judge verdicts ("llm") already made are kept."""
    if record.error is not None or record.response is None:
        return replace(record, parsed=None, parse_method=None, correct=None, refusal=False)
    if record.parse_method == "llm":
        return record
    if mode == "robust" and record.cut_off:  # no final answer, and thinking is never read as one
        return replace(record, parsed=None, parse_method="cutoff", correct=False, refusal=False)
    structured = getattr(bench, "parse_structured", None)  # --structured: its JSON answer first, then the rules
    parsed = structured(query, record.response) if structured is not None and mode == "robust" and \
        query.params.answer_schema is not None else None
    if parsed is None:
        parsed = bench.parse(query, record.response, mode)
    return _apply(bench, query, record, parsed)


def _apply(bench: BenchmarkRules, query: Query, record: Record, parsed: Parsed) -> Record:
    graded = object.__new__(type(record))  # dataclasses.replace by hand: it was a third of grading a record
    graded.__dict__.update(record.__dict__)  # (a shallow copy, as replace's; Record has no __post_init__)
    graded.parsed, graded.parse_method, graded.refusal = parsed.answer, parsed.method, parsed.refusal
    graded.correct = bool(bench.score(query, parsed))
    return graded


def needs_judge(record: Record) -> bool:
    return record.error is None and record.response is not None and record.parsed is None and not record.refusal \
        and record.parse_method not in ("empty", "cutoff")


async def judge_records(bench: BenchmarkRules, queries: Mapping[str, Query], records: list[Record],
                        runner: Runner, *, workers: int, mode: str = "official",
                        track: Callable[[int], Tracker] | None = None) -> int:
    """Resolve unparsed answers with the LLM extractor, in place. Returns how many it resolved.
    How a reply is read is the benchmark's (`judge_verdict`), in the run's mode."""
    jobs: dict[str, tuple[int, tuple[str, ...]]] = {}
    judge_queries: list[Query] = []
    for i, rec in enumerate(records):
        query = queries.get(rec.query_id)
        if query is None or not needs_judge(rec):
            continue
        jr = bench.judge_request(query, rec.response or "", mode)
        if jr is None:
            continue
        jid = "judge:" + rec.query_id
        jobs[jid] = (i, jr.valid)
        judge_queries.append(Query(id=jid, item_id=rec.item_id, base_id=rec.base_id, variant=rec.variant,
                                   messages=(Message.user(jr.prompt),), gold="", params=JUDGE_PARAMS))
    resolved = 0

    tracker = track(len(judge_queries)) if track is not None and judge_queries else None

    def sink(outcome: Outcome) -> None:
        nonlocal resolved
        if tracker is not None:
            tracker.advance(outcome)
        i, valid = jobs[outcome.query.id]
        if not outcome.response.ok:
            return
        query = queries[records[i].query_id]
        parsed = bench.judge_verdict(query, records[i].response or "", outcome.response.text, valid, mode)
        if parsed.answer is None and parsed.method == "llm_unresolved":
            records[i] = replace(records[i], parse_method="llm_unresolved")
            return
        records[i] = _apply(bench, query, records[i], parsed)
        resolved += 1

    if judge_queries:
        with tracker if tracker is not None else contextlib.nullcontext():
            await runner.run(judge_queries, sink, workers=workers)
    return resolved


def other_mode(mode: str) -> str:
    """The parsing mode a run did not use (official <-> robust)."""
    return "robust" if mode == "official" else "official"


def mode_disagreements(bench: BenchmarkRules, queries: Mapping[str, Query], records: Sequence[Record],
                       mode: str) -> dict[str, Any]:
    """How many rule-parsed answers the other parsing mode reads, or grades, differently.

    Answers the judge resolved are left out: neither rule mode read them.
    """
    other = other_mode(mode)
    compared = answers = verdicts = 0
    for rec in records:
        query = queries.get(rec.query_id)
        if query is None or rec.error is not None or rec.response is None or rec.parse_method == "llm":
            continue
        parsed = bench.parse(query, rec.response, other)
        compared += 1
        answers += parsed.answer != rec.parsed
        verdicts += bool(bench.score(query, parsed)) != (rec.correct is True)
    return {"mode": mode, "other_mode": other, "compared": compared, "answers_differ": answers,
            "verdicts_differ": verdicts}


def summarize(bench: BenchmarkRules, records: Sequence[Record], *, model: str, mode: str, n_items: int,
              n_queries: int, options: dict[str, Any], config: dict[str, Any], judge: str | None,
              queries: Mapping[str, Query] | None = None, not_in_run: int = 0,
              unscored: Iterable[str] = ()) -> dict[str, Any]:
    """summary.json as the run-directory contract fixes it (README, "Run directory"), plus a few helpful extras.

    `records` are the scored ones (this run's queries). records.jsonl may hold more, never scored
    and never deleted either: `not_in_run` counts records of queries this run does not have (an item
    skipped or missing, a shorter set); `unscored` names every such query id, and those answered for
    a question that has changed since, so that readers of records.jsonl (compare) leave them out.
    Data errors (an item's image cannot be read) are counted apart and scored nowhere: `data_errors`."""
    data = data_digest(records)
    if data is not None:
        unscored = [*unscored, *(r.query_id for r in records if r.error == DATA_ERROR)]
        records = [r for r in records if r.error != DATA_ERROR]
    counts = outcome_counts(records)
    if data is not None:
        counts["data_errors"] = data["queries"]
    missing = n_queries - len(records) - (data["queries"] if data else 0)
    usage = usage_totals(records)
    usage["cost_usd"] = None  # prices: see the providers issue
    unparsed = counts.get("unparsed", 0)
    failures = digest(records)
    answered = [r for r in records if not r.error] if failures else records
    metrics = bench.aggregate(records, options)
    hints = []
    if unparsed and not judge:
        hints.append(f"{unparsed} answers could not be parsed by rules; "
                     f"`evalkit report RUN_DIR --judge SPEC` would ask a judge model to resolve them")
    if counts["cutoffs"]:
        hints.append(cutoff_advice([r for r in records if outcome(r) == "cutoffs"], config))
    hint = "; ".join(hints) or None
    return {
        "benchmark": bench.name,
        "model": model,
        "mode": mode,
        "n_items": n_items,
        "n_queries": n_queries,
        "complete": missing == 0 and counts.get("errors", 0) == 0 and data is None,
        "missing": missing,
        "not_in_run": not_in_run,
        "unscored_ids": sorted(set(unscored)),
        "official_source": getattr(bench, "official_source", None),
        "deviations": list(getattr(bench, "deviations", ())),
        "chance_pct": chance_pct(queries.values()) if queries is not None else None,
        **chance_per_category(queries.values() if queries is not None else ()),
        "findings": [f.to_dict() for f in bench.findings(records)] if hasattr(bench, "findings") else [],
        "metrics": metrics,  # official denominators: a failed query is wrong
        "tables": [t.to_dict() for t in bench.tables(metrics, model, options)] if hasattr(bench, "tables") else [],
        "failures": failures,  # the error banner's digest (None: nothing failed)
        **({"data_errors": data} if data is not None else {}),  # items whose data failed: not the model's
        "metrics_answered": bench.aggregate(answered, options) if failures and answered else None,
        "counts": counts,
        "error_kinds": _tally(r.error for r in records if r.error),
        "parse_methods": _tally(r.parse_method or "error" for r in records),
        "parser_modes": mode_disagreements(bench, queries, records, mode) if queries is not None else None,
        "judge": judge,
        "hint": hint,
        "usage": usage,
        "cache": {"hits": sum(1 for r in records if r.cached), "misses": sum(1 for r in records if not r.cached)},
        "config": config,
        "evalkit_version": __version__,
        **structured_block(records, queries),
    }


def structured_block(records: Sequence[Record], queries: Mapping[str, Query] | None) -> dict[str, Any]:
    """summary.json's "structured" (`--structured`): how many queries asked for a structured answer and how many
    answers were read from it; nothing when none asked (the summaries of earlier runs stand)."""
    asked = sum(1 for q in (queries or {}).values() if q.params.answer_schema is not None)
    if not asked:
        return {}
    return {"structured": {"queries": asked, "read": sum(1 for r in records if r.parse_method == "structured")}}


def cutoff_advice(cut: Sequence[Record], config: Mapping[str, Any]) -> str:
    """What to do about answers cut off while thinking: a larger budget, for those queries alone."""
    return (f"{len(cut)} answers were cut off while thinking (the token limit came before an answer); re-run the "
            f"same command with `--reask-cutoffs --max-tokens {reask_budget(cut, config)}` to ask only those again "
            "with a larger budget")


def reask_budget(cut: Sequence[Record], config: Mapping[str, Any]) -> int:
    """The --max-tokens to suggest for the cut-off answers `cut`: the next power of two above twice the
    most output tokens one of them used, and above every budget they already had (the run's max_tokens
    as sent, its thinking budget or --reasoning-effort's, a re-ask's). A suggestion at or below what they
    spent would leave them cut off and print the same hint again."""
    used = max((_spent(r.usage) for r in cut), default=0)
    floor = max(2 * used, *(r.max_tokens or 0 for r in cut), _budget_sent(config), 1)
    return 1 << floor.bit_length()  # the next power of two above floor


def _spent(usage: Mapping[str, Any]) -> int:
    """Output tokens a reply used: OpenAI and Anthropic count the thinking in output_tokens, Gemini apart."""
    counts = [usage.get(k) for k in ("output_tokens", "reasoning_tokens")]
    return max((int(v) for v in counts if isinstance(v, int | float) and not isinstance(v, bool)), default=0)


def _budget_sent(config: Mapping[str, Any]) -> int:
    """The largest output or thinking budget the run's requests carried (config's generation_sent)."""
    sent = config.get("generation_sent") if isinstance(config, Mapping) else None
    if not isinstance(sent, Mapping):
        return 0
    thinking = sent.get("thinking")
    values = [sent.get("max_tokens"), sent.get("thinking_budget"),
              thinking.get("budget_tokens") if isinstance(thinking, Mapping) else None,
              EFFORT_BUDGETS.get(sent.get("reasoning_effort") or "")]
    return max((int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)), default=0)


def chance_pct(queries: Iterable[Query]) -> float | None:
    """Accuracy (%) of answering at random among each query's options: 25 for 4 options, 20 for 5,
    50 for yes/no (options, or a Yes/No gold); the mean when sets mix them; None for free answers."""
    shares = [1.0 / len(q.options) if q.options else 0.5 for q in queries
              if q.options or str(q.gold).lower() in ("yes", "no")]
    return round(100.0 * sum(shares) / len(shares), 4) if shares else None


def _question_chance(query: Query) -> float | None:
    """Accuracy (%) of a random answer to one question: 1/options, 50 for yes/no; None: a free answer."""
    if query.options:
        return round(100.0 / len(query.options), 4)
    return 50.0 if str(query.gold).lower() in ("yes", "no") else None


def chance_per_category(queries: Iterable[Query]) -> dict[str, dict[str, float | None]]:
    """{"chance_per_category": {category: chance %}} when the run's questions do not share one chance
    (TDBench mixes 2- and 4-option questions and grounding boxes): chance_pct is then a blend that no
    question type has. A category whose own questions mix chances, or that has free answers, is None
    (no chance line). Empty when every question has the same chance or no category is named."""
    per: dict[str, set[float | None]] = {}
    for q in queries:
        per.setdefault(q.category, set()).add(_question_chance(q))
    if len({v for values in per.values() for v in values}) <= 1 or set(per) <= {""}:
        return {}
    return {"chance_per_category": {cat: next(iter(values)) if len(values) == 1 else None
                                    for cat, values in sorted(per.items())}}


def _tally(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))
