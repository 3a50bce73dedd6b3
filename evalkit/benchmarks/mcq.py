"""The generic multiple-choice benchmark: any set mcq_io reads (VLMEvalKit TSV or JSONL).

One query per item, or every option shift (--circular) or image rotation (--rotations);
accuracy overall and per category, CircularEval or RE/VE/MA with the reliability fit.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.benchmarks.base import Benchmark, JudgeRequest, accuracy_table, all_right_table
from evalkit.benchmarks.lenient import STRICT, Sink
from evalkit.benchmarks.readers.mcq import load_jsonl, load_tsv, single_data_file
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Parsed, Record
from evalkit.core.resources import fill_template, read_prompt
from evalkit.core.settings import option
from evalkit.core.types import GenParams, Item, Query, Transform
from evalkit.grading.extract import (
    is_refusal,
    judge_prompt_mcq,
    parse_letter,
    render_options,
    strip_reasoning,
)
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.basic import accuracy, accuracy_by
from evalkit.protocols.circular import all_shifts, circular_summary
from evalkit.protocols.rotation import PlaceholderError, render, rotation_queries, rotation_summary


def build_prompt(template: str, question: str, options: Mapping[str, str], hint: str = "") -> str:
    """The VLMEvalKit/TDBench MCQ text: optional "Hint: ...", question, lettered options, instruction."""
    return fill_template(
        template,
        hint=f"Hint: {hint}\n" if hint else "",
        question=question,
        options=render_options(options),
    )


def unrotated(item: Item) -> tuple[str, dict[str, str]]:
    """The question and options as they read for the image as stored: direction placeholders
    (`<dir:top-left>`, see protocols.rotation) rendered for 0 degrees, never sent raw."""
    def shown(text: str) -> str:
        return render(text, 0) if "<" in text else text  # (no placeholder without "<": nothing to render)

    try:
        return shown(item.question), {k: shown(v) for k, v in item.options.items()}
    except PlaceholderError as e:
        raise EvalkitError(f"item {item.id}: {e}") from e


MEMO_REPLY_CHARS = 1000  # replies up to this long are memoised (at most 4,096 of them: a few MB)


@functools.lru_cache(maxsize=4096)
def read_reply(text: str, options: tuple[tuple[str, str], ...]) -> tuple[str | None, str, bool]:
    """(answer, method, refusal) for a reply to a question with these options: a pure function,
    memoised because a run reads the same replies again (its summary compares the parsing modes)
    and models give the same short replies ("B") to questions with the same options."""
    text = strip_reasoning(text)
    if not text:
        return None, "empty", False
    shown = dict(options)
    letter = parse_letter(text, letters=tuple(shown), options=shown)
    if letter is not None:
        return letter, "rule", False
    if is_refusal(text):
        return None, "refusal", True
    return None, "unparsed", False


class MCQ(Benchmark):
    """A generic multiple-choice benchmark: one query per item, accuracy overall and per category."""

    name = "mcq"
    default_data = "demo/mcq.tsv"
    headline_metric = "accuracy"

    @dataclass(frozen=True)
    class Options:
        circular: bool = option(False, help="mcq: CircularEval, ask every rotation of the options (n per item)")
        rotations: int = option(1, help="mcq: RotationalEval, ask each top-down image turned 0/90/180/270 degrees",
                                choices=(1, 2, 4))

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        first = "RE" if "RE" in metrics else "circular_accuracy" if "circular_accuracy" in metrics else "accuracy"
        return [(first, metrics.get(first))] + [(k, v) for k, v in metrics.items()
                                                 if k != first and not isinstance(v, dict)]

    def headline_for(self, options: dict[str, Any]) -> str:
        if (options.get("rotations") or 1) > 1:
            return "RE"
        return "circular_accuracy" if options.get("circular") else "accuracy"

    def load(self, data: Path, images: Path | None, options: dict[str, Any], sink: Sink = STRICT) -> list[Item]:
        path = single_data_file(Path(data))
        if path.suffix.lower() == ".tsv":
            return load_tsv(path, images, sink)
        if path.suffix.lower() in (".jsonl", ".json"):
            return load_jsonl(path, images, sink)
        raise EvalkitError(f"{path}: unknown format (expected .tsv, .jsonl or .json)")

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        template = read_prompt("mcq", "default.txt")
        for item in items:
            hint = str(item.meta.get("hint") or "")
            if (options.get("rotations") or 1) > 1:  # placeholders re-rendered, options shuffled per rotation
                transform = Transform(max_side=options.get("max_side"), max_pixels=options.get("max_pixels"))
                params = GenParams(temperature=0.0, max_tokens=int(options.get("max_tokens") or 1024))
                yield from rotation_queries(item, lambda q, o, h=hint: build_prompt(template, q, o, h), transform,
                                            params, rotations=int(options["rotations"]))
                continue
            question, opts = unrotated(item)
            if options.get("circular"):
                for shift, shown, gold in all_shifts(opts, item.answer):
                    yield self.make_query(item, options, build_prompt(template, question, shown, hint),
                                          variant={"shift": shift}, gold=gold, shown=shown,
                                          meta={"hint": hint, "question": question},
                                          query_id=f"{item.id}|s{shift}")
            else:
                yield self.make_query(item, options, build_prompt(template, question, opts, hint),
                                      meta={"hint": hint, "question": question}, shown=opts)

    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        options = tuple(query.options.items())  # (both modes read a reply alike)
        if len(text) > MEMO_REPLY_CHARS:  # long replies (reasoning) are read afresh: the memo stays small
            return Parsed(*read_reply.__wrapped__(text, options))
        return Parsed(*read_reply(text, options))

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        question = str(query.meta.get("question") or query.prompt_text())
        return JudgeRequest(
            prompt=judge_prompt_mcq(question, query.options, strip_reasoning(text)),
            valid=tuple(query.options),
        )

    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        has_categories = any(r.category for r in records)
        if any("rot" in r.variant for r in records):  # --rotations: RE / VE / MA and reliability (θ, r, g)
            return {**rotation_summary(records), "accuracy": accuracy(records), "n": len(records)}
        if any("shift" in r.variant for r in records):  # --circular: CircularEval on top of plain accuracy
            per = accuracy_by(records, lambda r: r.category or "(none)") if has_categories else {}
            return {**circular_summary(records), "accuracy": accuracy(records), "per_category": per, "n": len(records)}
        return {
            "accuracy": accuracy(records),
            "per_category": accuracy_by(records, lambda r: r.category or "(none)") if has_categories else {},
            "n": len(records),
        }

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """accuracy (%) per record; --circular: circular_accuracy (%), 1 per base question when all its
        shifts are right; --rotations: RE (a fraction), 1 per base question right at every rotation."""
        if any("rot" in r.variant for r in records):
            return all_right_table(records, "RE", 1.0)
        if any("shift" in r.variant for r in records):
            return all_right_table(records, "circular_accuracy", 100.0)
        return accuracy_table(records)
