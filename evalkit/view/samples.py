"""The samples as the page reads them: one table row per question, one detail record per question.

Pure functions over the runs, the rebuilt questions and the thumbnails. A row is small (what the
table shows and filters on: category, the question's start, each model's outcome over its
variants, whether models or variants disagree); everything else of a question goes in its detail
(every variant, every model's answer, the other parse mode's verdict), loaded only when opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.core.record import Record
from evalkit.core.types import ImageRef, Query
from evalkit.grading.grade import other_mode
from evalkit.metrics.basic import outcome
from evalkit.money.costs import list_cost, record_cost
from evalkit.money.pricing import Price
from evalkit.money.shown import paid_and_list
from evalkit.view.parses import ParseMemo
from evalkit.view.preamble import distinctive
from evalkit.view.questions import Question, QuestionSet, Variant, load_key, variant_label
from evalkit.view.runs import ViewRun

# outcome bucket -> the bit the page filters on (a question's mask over its variants is their OR)
BITS = {"correct": 1, "wrong": 2, "unparsed": 4, "errors": 8, "refusals": 16, "cutoffs": 32, "missing": 64}
MODELS_DISAGREE, VARIANTS_DISAGREE, NOT_SCORED = 1, 2, 4  # row flags
SNIPPET = 300  # characters of the question a row carries (the table shows and searches them)

ImagesOf = Callable[[int, str], list[dict[str, Any]]]  # (run, query id) -> the images as that run sent them


@dataclass
class Context:
    """What building a question's detail reads: the runs, their questions, images, prices and the parse memo."""

    runs: Sequence[ViewRun]
    qs: QuestionSet
    images_of: ImagesOf
    memo: ParseMemo
    prices: list[Price | None]
    parse_contexts: list[bytes]
    affixes: tuple[str, str] = ("", "")  # what every prompt starts and ends with: stored once (meta)

    @staticmethod
    def make(runs: Sequence[ViewRun], qs: QuestionSet, images_of: ImagesOf, memo: ParseMemo) -> Context:
        return Context(runs, qs, images_of, memo, [run_price(r) for r in runs],
                       [ParseMemo.context(r.benchmark, load_key(r), r.identity.get("data")) for r in runs],
                       prompt_affixes([v.prompt for q in qs.questions for v in q.variants]))


def prompt_affixes(prompts: Sequence[str], least: int = 12) -> tuple[str, str]:
    """The text every prompt starts with and ends with (a benchmark's fixed instructions), when worth
    storing once: at 30,000 questions the repeated instructions were an eighth of the site's data."""
    if len(prompts) < 2:
        return "", ""
    head = os.path.commonprefix(list(prompts))
    tail = os.path.commonprefix([p[::-1] for p in prompts])[::-1]
    head = head if len(head) >= least else ""
    tail = tail if len(tail) >= least else ""
    if min(map(len, prompts)) < len(head) + len(tail):  # they overlap in the shortest prompt: keep the start only
        tail = ""
    return head, tail


def run_price(run: ViewRun) -> Price | None:
    """The price the run was costed with (config.json keeps it); None when it had none."""
    saved = run.config.get("price")
    if not isinstance(saved, dict):
        return None
    try:
        return Price(**saved)
    except TypeError:  # a price saved by another version, with other fields
        return None


def record_view(rec: Record, price: Price | None, extras: dict[str, Any] | None, scored: bool) -> dict[str, Any]:
    """One model's answer to one query, as the run recorded and scored it."""
    usage = rec.usage or {}
    out: dict[str, Any] = {"s": outcome(rec), "r": rec.response, "p": rec.parsed, "m": rec.parse_method,
                           "ok": rec.correct, "lat": rec.latency_s, "in": usage.get("input_tokens", 0),
                           "out": usage.get("output_tokens", 0)}
    # what is usually zero, false or "stop" is left out (the page reads a missing key as that)
    if usage.get("cached_input_tokens"):
        out["cin"] = usage["cached_input_tokens"]
    if usage.get("reasoning_tokens"):
        out["rt"] = usage["reasoning_tokens"]
    if rec.cached:
        out["c"] = True
    if rec.error is None and (listed := list_cost(price, rec)) is not None:  # paid when asked (cache: 0), and list
        out["cost"] = paid_and_list(record_cost(price, rec), listed)
    if rec.finish_reason != "stop":
        out["fin"] = rec.finish_reason
    if rec.image_sizes:
        out["sz"] = rec.image_sizes
    if rec.error is not None:
        out["err"], out["em"] = rec.error, rec.error_message
    if rec.refusal:
        out["ref"] = True
    if rec.via:
        out["via"] = rec.via
    if rec.served_by:
        out["sb"] = rec.served_by
    if not scored:
        out["ns"] = True
    if extras:
        out["x"] = extras
    return out


def _answer_key(rec: Record) -> str:
    """What two models' answers are compared on: the parsed answer, else the kind of failure."""
    return rec.parsed if rec.parsed is not None else "·" + outcome(rec)


def row(question: Question, runs: Sequence[ViewRun], categories: dict[str, int], preamble: int = 0) -> list[Any]:
    """[category index, question start, flags, [mask, right, answered, first answer] per model]; the
    question's start leaves out its first `preamble` characters (a preamble many questions share)."""
    per_model: list[list[Any]] = []
    flags = 0
    answers: dict[str, set[str]] = {}
    for run in runs:
        mask = right = n = 0
        first = ""
        verdicts: set[bool] = set()
        for v in question.variants:
            rec = run.records.get(v.qid)
            if rec is None:
                mask |= BITS["missing"]
                continue
            bucket = outcome(rec)
            mask |= BITS[bucket]
            n += 1
            right += bucket == "correct"
            verdicts.add(bucket == "correct")
            if not first:
                first = rec.parsed or ""
            answers.setdefault(v.qid, set()).add(_answer_key(rec))
            if v.qid in run.unscored:
                flags |= NOT_SCORED
        if len(verdicts) > 1:
            flags |= VARIANTS_DISAGREE
        if n == 0:
            mask = BITS["missing"]
        per_model.append([mask, right, n, first])
    if len(runs) > 1 and any(len(a) > 1 for a in answers.values()):
        flags |= MODELS_DISAGREE
    return [categories[question.category], distinctive(question.question, preamble)[:SNIPPET], flags, *per_model]


def detail(question: Question, ctx: Context) -> dict[str, Any]:
    """Everything the page shows of one question: its text, options, gold, images and every variant."""
    out: dict[str, Any] = {"id": question.id, "cat": question.category, "q": question.question,
                           "o": question.options, "g": question.gold, "v": []}
    if question.from_records:
        out["fr"] = True
    repeats = any(v.repeat for v in question.variants)
    for v in question.variants:
        out["v"].append(_variant(question, v, ctx, repeats))
    return out


def _variant(question: Question, v: Variant, ctx: Context, repeats: bool) -> dict[str, Any]:
    head, tail = ctx.affixes
    d: dict[str, Any] = {"id": v.qid, "l": variant_label(v, repeats), "g": v.gold,
                         "pr": v.prompt[len(head):len(v.prompt) - len(tail)]}
    if v.question and v.question != question.question:
        d["q"] = v.question
    if v.options and v.options != question.options:
        d["o"] = v.options
    answers: list[dict[str, Any] | None] = []
    shown: list[list[dict[str, Any]]] = []
    bench = ctx.qs.bench
    for k, run in enumerate(ctx.runs):
        rec = run.records.get(v.qid)
        query = ctx.qs.queries[k].get(v.qid)
        if rec is None:
            answers.append(None)
        else:
            a = record_view(rec, ctx.prices[k], run.extras.get(v.qid), v.qid not in run.unscored)
            if query is not None and bench is not None and rec.error is None and rec.response is not None:
                a["o"] = ctx.memo.read(bench, query, ctx.parse_contexts[k], v.qid, rec.response, other_mode(run.mode))
            answers.append(a)
        if query is not None:
            shown.append(ctx.images_of(k, v.qid))
        elif rec is not None:  # the data is gone: as many placeholders as the record sent images
            why = ctx.qs.missing_data[k] or "this query is not in the run's data any more"
            shown.append([{"t": None, "w": 0, "h": 0, "f": None, "x": f"image unavailable: {why}"}
                          for _ in range(len(rec.image_sizes) or len(rec.image_fps))])
        else:
            shown.append([])
    d["a"] = answers
    asked = [s for s in shown if s]
    d["im"] = asked[0] if asked else []
    if any(s != d["im"] for s in asked):
        d["imm"] = shown  # the runs sent different images (other providers' limits, other size settings)
    return d


def image_refs(query: Query) -> list[tuple[ImageRef, Any]]:
    """(source, transform) of each image of a query, in the order it was sent."""
    return [(p.ref, p.transform) for p in query.image_parts()]
