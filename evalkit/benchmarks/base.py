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

from ..types import Item, Parsed, Query, Record


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
