"""The questions behind the records, rebuilt through the benchmark's own loader from each run's config.

Records keep the answer, the gold letter and the prompt text, not the question's options or its
images, so the page asks the benchmark (`prepare`) for them, as `evalkit report` does. When the
data cannot be loaded (moved, deleted, written on another machine), every question is still
shown from its records (prompt text and gold), with the reason in place of what is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalkit.benchmarks import benchmark_class
from evalkit.benchmarks.base import Benchmark
from evalkit.benchmarks.prepare import prepare
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.settings import field_names
from evalkit.core.types import Query
from evalkit.engine.repeats import source_id
from evalkit.engine.run_data import index_places
from evalkit.view.runs import ViewRun

# What the loaders read besides the benchmark's own options (the rest of a run's settings change only who
# is asked and how): runs that agree on these share one load of the data.
LOAD_KEYS = ("data", "images", "limit", "max_side", "max_pixels", "allow_outside_images")


@dataclass
class Variant:
    """One query of a question (a shift, rotation, language or repeat) as the runs asked it."""

    qid: str
    variant: dict[str, Any]
    repeat: int = 0
    gold: str = ""
    question: str = ""  # as shown in this variant (a translation, say)
    options: dict[str, str] = field(default_factory=dict)  # as shown (shifted)
    prompt: str = ""


@dataclass
class Question:
    """One base question and its variants, in the data's order."""

    id: str
    category: str
    question: str
    options: dict[str, str]
    gold: str
    variants: list[Variant] = field(default_factory=list)
    from_records: bool = False  # the data could not be loaded: rebuilt from the records alone


@dataclass
class QuestionSet:
    """Every question any run asked or answered, and each run's own queries (for images and parsing)."""

    bench: Benchmark | None
    questions: list[Question]
    queries: list[dict[str, Query]]  # per run (same order as the runs): query id -> query, repeats included
    notes: list[str] = field(default_factory=list)
    missing_data: list[str | None] = field(default_factory=list)  # per run: why its data did not load
    # the sha256 of images inside big data files, kept with their saved indexes (span ref value -> sha256)
    span_hashes: dict[str, str] = field(default_factory=dict)


def load_options(bench: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options a benchmark's loader and expansion read (see LOAD_KEYS)."""
    keep = set(LOAD_KEYS)
    with contextlib.suppress(EvalkitError):
        keep |= set(field_names(benchmark_class(bench).Options))
    return {k: v for k, v in options.items() if k in keep}


def load_key(run: ViewRun) -> str:
    return json.dumps(load_options(run.benchmark, run.options), sort_keys=True, default=str)


def rebuild(runs: Sequence[ViewRun]) -> QuestionSet:
    """Load each distinct data/option set once; merge the questions of every run, data order first."""
    loads: dict[str, tuple[Benchmark | None, list[Query], str | None]] = {}
    span_hashes: dict[str, str] = {}
    for run in runs:
        key = load_key(run)
        if key not in loads:
            loads[key] = _load(run, span_hashes)
    bench = next((b for b, _, _ in loads.values() if b is not None), None)
    out = QuestionSet(bench, [], [], [], span_hashes=span_hashes)
    by_id: dict[str, Question] = {}
    variants: dict[tuple[str, str], Variant] = {}
    for run in runs:
        _, queries, why = loads[load_key(run)]
        out.missing_data.append(why)
        mine = {q.id: q for q in queries}
        out.queries.append(mine)
        for q in queries:
            _add_query(by_id, variants, out.questions, q)
    for k, run in enumerate(runs):  # answers to queries the data no longer holds, or no data at all
        mine = out.queries[k]
        for rec in run.records.values():
            base = mine.get(source_id(rec))
            if rec.repeat and base is not None:
                mine[rec.query_id] = base
            if (rec.base_id, rec.query_id) not in variants:
                _add_record(by_id, variants, out.questions, rec, base)
    for key in loads:
        why = loads[key][2]
        if why:
            names = ", ".join(r.label for r in runs if load_key(r) == key)
            out.notes.append(f"{names}: questions shown from the records alone ({why})")
    return out


def _load(run: ViewRun, span_hashes: dict[str, str]) -> tuple[Benchmark | None, list[Query], str | None]:
    """The run's queries; a big data file through the saved index its run left (read, not the file), and
    the images' hashes kept with it into `span_hashes` (the thumbnails made before are found unread)."""
    index_dir, index_also = index_places(run.path, None, os.environ)
    try:
        prepared = prepare(run.benchmark, load_options(run.benchmark, run.options), index_dir=index_dir,
                           index_also=index_also)
    except (EvalkitError, OSError, ValueError) as e:  # a viewer shows the records whatever the data's state
        return _bench_or_none(run.benchmark), [], str(e)
    if prepared.index is not None:
        span_hashes.update(prepared.index.image_hashes)
    return prepared.bench, prepared.queries, None


def _bench_or_none(name: str) -> Benchmark | None:
    from evalkit.benchmarks import get_benchmark

    try:
        return get_benchmark(name)
    except EvalkitError:
        return None


def _add_query(by_id: dict[str, Question], variants: dict[tuple[str, str], Variant], order: list[Question],
               q: Query) -> None:
    question = by_id.get(q.base_id)
    shown = str(q.meta.get("question") or "")
    if question is None:
        question = by_id[q.base_id] = Question(q.base_id, q.category, shown, dict(q.options), q.gold)
        order.append(question)
    elif question.from_records:  # another run could load the data: its text replaces the prompt
        question.question, question.options, question.gold, question.from_records = shown, dict(q.options), q.gold, False
    if (q.base_id, q.id) in variants:
        return
    v = Variant(q.id, dict(q.variant), 0, q.gold, shown, dict(q.options), q.prompt_text())
    variants[(q.base_id, q.id)] = v
    question.variants.append(v)


def _add_record(by_id: dict[str, Question], variants: dict[tuple[str, str], Variant], order: list[Question],
                rec: Record, base: Query | None) -> None:
    question = by_id.get(rec.base_id)
    if question is None:
        question = by_id[rec.base_id] = Question(rec.base_id, rec.category, rec.prompt, {}, rec.gold,
                                                  from_records=True)
        order.append(question)
    if base is not None:
        v = Variant(rec.query_id, dict(base.variant), rec.repeat, base.gold, str(base.meta.get("question") or ""),
                    dict(base.options), base.prompt_text())
    else:
        v = Variant(rec.query_id, dict(rec.variant), rec.repeat, rec.gold, rec.prompt, {}, rec.prompt)
    variants[(rec.base_id, rec.query_id)] = v
    question.variants.append(v)


def variant_label(v: Variant, repeats: bool = False) -> str:
    """"shift 1 · lang en · repeat 2" (repeat 0 named when the question was repeated); "as asked" for a
    question without variants."""
    parts = [f"{k} {val}" for k, val in v.variant.items()]
    if v.repeat or repeats:
        parts.append(f"repeat {v.repeat}")
    return " · ".join(parts) or "as asked"
