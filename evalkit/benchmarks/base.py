"""What a benchmark is to the runner: load -> expand -> (ask) -> parse -> score -> aggregate.

A benchmark is a small object with pure methods; the runner never needs to know which
benchmark it is driving. Its protocol switches are a frozen `Options` dataclass (fields made
with `settings.option`), from which its CLI flags and its part of the run identity are derived.
The methods receive `options` as a plain dict: the benchmark's options plus the run's
generation and image settings (max_tokens, max_side, ...), already validated.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from evalkit.benchmarks.lenient import STRICT, LenientLoad, Sink
from evalkit.core.findings import Finding
from evalkit.core.record import Parsed, Record
from evalkit.core.report_table import ReportTable
from evalkit.core.types import GenParams, ImagePart, ImageRef, Item, Message, Query, Transform
from evalkit.grading.answer_schema import default_schema, read_structured
from evalkit.grading.extract import JudgeRequest, parse_judge_reply
from evalkit.metrics.analysis.scoretable import ScoreTable


@dataclass(frozen=True)
class NoOptions:
    """A benchmark without protocol switches."""


def _shared_settings(max_side: Any, max_pixels: Any, max_tokens: int) -> tuple[Transform, GenParams]:
    """The image transform and generation settings of a run's plain queries: one pair of (frozen) objects
    shared by all of them, not a pair per query. A request key reads a shared object once
    (ask/request_key.py `_memo`) where a new one is repr'd again: half of every cache lookup's cost."""
    try:
        return _settings_pair(max_side, max_pixels, max_tokens)
    except TypeError:  # an unhashable value (not from the command line): built for this query alone
        return _settings_pair.__wrapped__(max_side, max_pixels, max_tokens)


@functools.lru_cache(maxsize=64)
def _settings_pair(max_side: Any, max_pixels: Any, max_tokens: int) -> tuple[Transform, GenParams]:
    return Transform(max_side=max_side, max_pixels=max_pixels), GenParams(temperature=0.0, max_tokens=max_tokens)


class Benchmark:
    """Base class with the defaults most benchmarks want. Subclasses set `name`, `Options`,
    `headline_metric` and override load / expand / aggregate (the registry checks the declarations)."""

    name: ClassVar[str] = ""
    #: data path used when --data is omitted (relative to the bundled datasets folder), or None
    default_data: ClassVar[str | None] = None
    #: the protocol switches: a frozen dataclass of settings.option fields (flags are generated)
    Options: ClassVar[type] = NoOptions
    #: the metric that ranks models (the key in `aggregate`'s dict, and `score_table().metric`)
    headline_metric: ClassVar[str] = ""
    # the code `--mode official` reproduces (repository@commit), named in every summary and report
    official_source: ClassVar[str | None] = None
    # where official mode deliberately departs from that code, one line each (listed in every report)
    deviations: ClassVar[tuple[str, ...]] = ()

    def headline_for(self, options: dict[str, Any]) -> str:
        """The headline metric under these options (a benchmark whose protocol switches change
        its headline, like mcq --circular, overrides this)."""
        return self.headline_metric

    # ---- building queries ------------------------------------------------------------
    def make_query(self, item: Item, options: dict[str, Any], text: str, *, variant: dict[str, Any] | None = None,
                   images: Sequence[ImageRef] | None = None, gold: str | None = None,
                   shown: dict[str, str] | None = None, transform: Transform | None = None,
                   max_tokens: int = 1024, meta: dict[str, Any] | None = None, query_id: str | None = None) -> Query:
        """One query for `item`: its images (with the run's size limits applied to `transform`), then
        `text`, under the run's generation settings. The id is the item id plus the variant's values
        unless `query_id` is given (ids are what resume keys on: never change a released one)."""
        variant = dict(variant or {})
        shared = _shared_settings(options.get("max_side"), options.get("max_pixels"),
                                  int(options.get("max_tokens") or max_tokens))
        if transform is None:
            transform = shared[0]
        else:
            transform = replace(transform, max_side=transform.max_side or options.get("max_side"),
                                max_pixels=transform.max_pixels or options.get("max_pixels"))
        parts = [ImagePart(ref, transform) for ref in (item.images if images is None else images)]
        params = shared[1]
        suffix = "".join(f"|{k}{v}" for k, v in variant.items())
        return Query(id=query_id or item.id + suffix, item_id=item.id, base_id=item.id, variant=variant,
                     messages=(Message.user(*parts, text),), gold=item.answer if gold is None else gold,
                     options=dict(item.options if shown is None else shown), params=params,
                     category=item.category, meta={"question": item.question, **(meta or {})})

    # ---- load / expand ---------------------------------------------------------------
    def load(self, data: Path, images: Path | None, options: dict[str, Any], sink: Sink = STRICT) -> list[Item]:
        """Read the official files into Items. Bad rows raise EvalkitError naming file and row; a
        lenient `sink` collects them instead (`load_lenient`)."""
        raise NotImplementedError

    def load_lenient(self, data: Path, images: Path | None, options: dict[str, Any]) -> LenientLoad:
        """Read like `load`, but never stop at a fault: the items that could be read, plus one problem
        per row (or file) that could not (`evalkit lint` reports them all; a run keeps `load`).
        Items whose content is faulty but readable (gold not among the options, an image file that is
        not there) are kept, for lint's checks to name. This default hands `load` a lenient sink; a
        benchmark whose loader reads otherwise overrides it. A `load` without the `sink` parameter is
        called without it: its first fault is the file's one problem, not a TypeError."""
        sink = Sink(lenient=True)
        items: list[Item] = []
        takes_sink = "sink" in inspect.signature(self.load).parameters
        with sink.guard(data, kind="unreadable-file"):
            items = self.load(data, images, options, sink) if takes_sink else self.load(data, images, options)
        return LenientLoad(items, sink.problems)

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        """One Query per (item, variant), the gold answer moved with the variant."""
        raise NotImplementedError

    # ---- parse / score -----------------------------------------------------------------
    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        """Rule parsing of one response ("official" or "robust" mode). Never a guess."""
        raise NotImplementedError

    def answer_schema(self, query: Query) -> dict[str, Any] | None:
        """The JSON schema of this query's answer for `--structured` (grading/answer_schema.py): a box,
        a letter among its options, Yes/No; None for an open answer (nothing is sent)."""
        return default_schema(query)

    def parse_structured(self, query: Query, text: str) -> Parsed | None:
        """A `--structured` reply's answer (robust mode), read before the rules; None: read by the rules."""
        return read_structured(query, text, lambda q, value: self.parse(q, value, "robust"))

    def judge_request(self, query: Query, text: str, mode: str = "official") -> JudgeRequest | None:
        """The LLM-extractor prompt for an answer the rules could not parse (None: no judge)."""
        return None

    def judge_verdict(self, query: Query, response: str, reply: str, valid: Sequence[str], mode: str) -> Parsed:
        """What the extractor's `reply` about `response` makes the answer. Default: its first valid
        answer token ("llm"), else unresolved ("llm_unresolved", answer None). A benchmark whose
        official code reads the reply its own way overrides this (IF-Bench)."""
        answer = parse_judge_reply(reply, valid)
        return Parsed(answer, "llm") if answer is not None else Parsed(None, "llm_unresolved")

    def tables(self, metrics: dict[str, Any], label: str, options: dict[str, Any]) -> list[ReportTable]:
        """The paper's headline table as one row for `label`, then the detail tables. Default: the
        headline metric, and accuracy per category when the metrics have one."""
        head = [ReportTable(f"{self.name}: {self.headline_for(options)}", ("model", self.headline_for(options)),
                            [[label, metrics.get(self.headline_for(options))]], console=True)]
        per = metrics.get("per_category")
        if isinstance(per, dict) and per and all(isinstance(v, int | float) for v in per.values()):
            head.append(ReportTable("Accuracy per category (%)", ("category", "accuracy"),
                                    [[k, v] for k, v in per.items()], console=True))
        return head

    def load_notes(self) -> list[str]:
        """What the last `load` read in a way a run should say once at its start (TDBench: options read
        as missing); none by default."""
        return []

    def findings(self, records: Sequence[Record]) -> list[Finding]:
        """What the data itself says about these scores (duplicate questions, ...): none by default."""
        return []

    def score(self, query: Query, parsed: Parsed) -> bool | None:
        """Correctness of one parsed answer; None when there is nothing to score."""
        if parsed.answer is None:
            return False
        return parsed.answer == query.gold

    # ---- aggregate ---------------------------------------------------------------------
    def aggregate(self, records: Sequence[Record], options: dict[str, Any]) -> dict[str, Any]:
        """The benchmark's official metrics under their paper names."""
        raise NotImplementedError

    def headline(self, metrics: dict[str, Any]) -> list[tuple[str, Any]]:
        """The few numbers the console shows first, in order: the declared headline metric first."""
        first = [(self.headline_metric, metrics[self.headline_metric])] if self.headline_metric in metrics else []
        return first + [(k, v) for k, v in metrics.items() if not isinstance(v, dict) and k != self.headline_metric]

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """The headline metric as observations (for confidence intervals and paired tests).

        `table.metric` is `headline_for(options)` and
        `table.estimate()` equals that number. Default: plain accuracy (%) over records, one
        observation per record, resampled by base question. None when there is no headline number.
        """
        return accuracy_table(records)


def accuracy_table(records: Sequence[Record], metric: str = "accuracy") -> ScoreTable:
    """Percent of records right (errors, refusals and unparsed are not): one observation per record,
    unit the base question (its variants resampled together), pairing key the query id. The answers
    as a plain tuple: its estimate needs no numpy (ScoreTable)."""
    return ScoreTable(metric, tuple(r.base_id for r in records),
                      tuple(1.0 if r.correct is True else 0.0 for r in records), None, 100.0,
                      tuple(r.query_id for r in records))


def all_right_table(records: Sequence[Record], metric: str, scale: float) -> ScoreTable:
    """One observation per base question: 1 when every one of its records (variants) is right.

    The group is whatever records share a base_id, so an incomplete group (a variant never asked)
    counts on what it has, as `circular_summary` and `rotation_summary` count it.
    """
    groups: dict[str, bool] = {}
    for r in records:
        groups[r.base_id] = groups.get(r.base_id, True) and r.correct is True
    units = tuple(groups)
    return ScoreTable(metric, units, tuple(float(ok) for ok in groups.values()), None, scale, units)
