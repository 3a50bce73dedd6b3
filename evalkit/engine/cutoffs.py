"""`--reask-cutoffs --max-tokens N`: ask again only the answers cut off while thinking.

A reasoning model that spends its whole output budget thinking returns no answer (core.types
is_cut_off). The same request would end the same way, so the runner neither retries nor forgets
it: it is cached and recorded, and counted as a cut-off. The remedy is a larger budget, for those
queries alone. With --reask-cutoffs, --max-tokens is that budget, not the run's: the run keeps its
identity and directory, and each re-asked record carries the budget it was asked with
(`Record.max_tokens`), so resuming checks its request key against that budget (resume.py) and the
same command, or the plain one, sends nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.types import Query


def with_budget(query: Query, max_tokens: int | None) -> Query:
    """The query as asked with another output budget (None: as it is)."""
    if max_tokens is None or max_tokens == query.params.max_tokens:
        return query
    return replace(query, params=replace(query.params, max_tokens=max_tokens))


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], int | None]:
    """With reask_cutoffs, --max-tokens is the cut-offs' budget: the run's options without it, and
    the budget (None: not re-asking cut-offs). The run's own max_tokens is then its directory's
    (`run_cut_off`)."""
    if not options.get("reask_cutoffs"):
        return dict(options), None
    budget = options.get("max_tokens")
    if budget is None:
        raise EvalkitError("--reask-cutoffs needs --max-tokens N: the larger output budget to ask the cut-off "
                           "answers again with")
    return {k: v for k, v in options.items() if k != "max_tokens"}, budget


def run_cut_off(identity: Mapping[str, Any], candidates: Iterable[Path]) -> tuple[Path, dict[str, Any]] | None:
    """The run directory whose identity is this command's but for max_tokens (the run that was cut
    off, with its own --max-tokens or the default), and that identity; None: there is none."""
    for path in candidates:
        try:
            saved = json.loads((path / "config.json").read_text(encoding="utf-8")).get("identity")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(saved, dict) and {k: v for k, v in saved.items() if k != "max_tokens"} == dict(identity):
            return path, saved
    return None


def check_budget(budget: int, queries: Sequence[Query]) -> None:
    run_budget = max((q.params.max_tokens for q in queries), default=0)
    if budget <= run_budget:  # (the run's own budget: its directory's --max-tokens, or the benchmark's)
        raise EvalkitError(f"--max-tokens {budget} with --reask-cutoffs must be larger than the run's own "
                           f"max_tokens ({run_budget}): the same budget would cut them off again")


def to_reask(current: Mapping[str, Record], budget: int) -> list[str]:
    """Query ids whose answer was cut off with a smaller budget than `budget`."""
    return [qid for qid, rec in current.items() if rec.cut_off and (rec.max_tokens or 0) < budget]


def reask_note(n: int, budget: int) -> str:
    if not n:
        return f"--reask-cutoffs: no answer was cut off with less than {budget} output tokens; nothing to ask"
    return f"asking again {n:,} answers cut off while thinking, with max_tokens {budget:,}"
