"""What a benchmark is to the runner: load -> expand -> (ask) -> parse -> score -> aggregate.

A benchmark is a small object with pure methods; the runner never needs to know which
benchmark it is driving. Options come from the CLI (or evalkit.run keyword arguments)
as a plain dict, already validated by argparse.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.analysis.scoretable import ScoreTable
from evalkit.core.types import Item, Parsed, Query, Record


@dataclass(frozen=True)
class JudgeRequest:
    """A prompt for the LLM extractor, and how to read its reply back into an answer."""

    prompt: str
    valid: tuple[str, ...]  # the answers the judge may return (e.g. ("A","B","C","D"))


class Benchmark:
    """Base class with the defaults most benchmarks want. Subclasses set `name` and override."""

    name: str = ""
    description: str = ""
    #: data path used when --data is omitted (relative to the bundled datasets folder), or None
    default_data: str | None = None

    # ---- command line -------------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Benchmark-specific flags (added to `evalkit run`)."""

    # ---- load / expand ---------------------------------------------------------------
    def load(self, data: Path, images: Path | None, options: dict[str, Any]) -> list[Item]:
        """Read the official files into Items. Bad rows raise EvalkitError naming file and row."""
        raise NotImplementedError

    def expand(self, items: Sequence[Item], options: dict[str, Any]) -> Iterable[Query]:
        """One Query per (item, variant), the gold answer moved with the variant."""
        raise NotImplementedError

    # ---- parse / score -----------------------------------------------------------------
    def parse(self, query: Query, text: str, mode: str) -> Parsed:
        """Rule parsing of one response ("official" or "robust" mode). Never a guess."""
        raise NotImplementedError

    def judge_request(self, query: Query, text: str) -> JudgeRequest | None:
        """The LLM-extractor prompt for an answer the rules could not parse (None: no judge)."""
        return None

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
        """The few numbers the console shows first, in order."""
        return [(k, v) for k, v in metrics.items() if not isinstance(v, dict)]

    def score_table(self, records: Sequence[Record], options: dict[str, Any]) -> ScoreTable | None:
        """The headline metric as observations (for confidence intervals and paired tests).

        `table.metric` is the first numeric entry of `headline(aggregate(...))` and
        `table.estimate()` equals that number. Default: plain accuracy (%) over records, one
        observation per record, resampled by base question. None when there is no headline number.
        """
        return accuracy_table(records)


def accuracy_table(records: Sequence[Record], metric: str = "accuracy") -> ScoreTable:
    """Percent of records right (errors, refusals and unparsed are not): one observation per record,
    unit the base question (its variants resampled together), pairing key the query id."""
    return ScoreTable(metric, tuple(r.base_id for r in records),
                      np.array([float(r.correct is True) for r in records]), None, 100.0,
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
    return ScoreTable(metric, units, np.array([float(ok) for ok in groups.values()]), None, scale, units)
