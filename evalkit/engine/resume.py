"""What a resumed run may keep from its records: an answer counts only for the request it answered.

A query id says which item and variant a record belongs to, not what was asked: rewrite a data
set with the same ids and a record keyed by id alone would grade an old answer against a new
question's gold. Each record carries the request key it was asked with (sha256 of provider,
model, endpoint, parameters, messages and image bytes; ask/runner.py), so a record is *current*
only when that key is one this run would send for its query (`Runner.keys_of`, which also
knows 0.1.0's spelling of the endpoint). Any other answered record is *changed*: its query is
asked again, and the old line stays in records.jsonl until a new answer replaces it, so an
interrupted or failed re-ask loses nothing (a failure counts in this run's summary; the old
answer is kept but never scored). A gold answer or category edited in the data changes no
request: the answer still stands and is graded against the new gold.

An answer 0.1.0 was asked for the same question (0.1 worded some prompts its own way) was paid for:
it is kept and graded, the run is marked as not asked with the official requests, and `--reask` asks
again (`older_requests`). Only 0.1.0's own answers get this: those found in a directory 0.1.0 wrote
(its config.json in 0.1.0's form, or a summary.json of an earlier evalkit that kept them) are marked
`asked_with: evalkit-0.1` in records.jsonl the first time they are seen, and from then on only marked
records are. An answer today's evalkit was asked for is never one: if its request changed, it is asked
again (and `evalkit report` leaves it out of the scores).

Records of queries that are not in this run (an item skipped under --skip-missing, a shorter
--limit, an emptied file) are *outside*: kept in records.jsonl untouched, left out of every score,
and counted in the summary (`not_in_run`). Nothing is deleted because an input is missing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalkit.core.record import Record
from evalkit.core.types import Query
from evalkit.engine.cutoffs import with_budget
from evalkit.providers.base import ProviderSpec
from evalkit.rundir.layout import SUMMARY

KeysOf = Callable[[Query], Sequence[str]]
OLDER_REQUESTS = "evalkit-0.1 (not official)"  # summary["requests"] of a run keeping 0.1's paid answers
V010 = "evalkit-0.1"  # Record.asked_with of an answer 0.1.0 was asked for


@dataclass
class Resume:
    """The records found in a run directory, sorted by what this run may do with them."""

    current: dict[str, Record] = field(default_factory=dict)  # answers to exactly this run's requests: done
    changed: dict[str, Record] = field(default_factory=dict)  # answers to other requests: asked again
    unchecked: dict[str, Record] = field(default_factory=dict)  # answered, but the key could not be computed
    outside: list[Record] = field(default_factory=list)  # queries not in this run: kept, not scored
    errors: dict[str, Record] = field(default_factory=dict)  # failed queries of this run: a run asks them again

    def mark_older(self, queries: Mapping[str, Query], *, v010_dir: bool = False) -> int:
        """Mark (`asked_with`) the changed answers that are 0.1.0's answers to today's questions
        (`older_requests`), so records.jsonl says so from the next write on; returns how many were
        not marked yet (records.jsonl is then worth rewriting before anything is asked)."""
        newly = 0
        for qid, record in older_requests(self.changed, queries, v010_dir=v010_dir).items():
            if record.asked_with != V010:
                self.changed[qid] = replace(record, asked_with=V010)
                newly += 1
        return newly

    def keep_older(self, queries: Mapping[str, Query], *, v010_dir: bool = False) -> dict[str, Record]:
        """Move the changed answers 0.1.0 was asked for today's question (`older_requests`,
        marked) to `current`, graded against today's gold; returns them."""
        self.mark_older(queries, v010_dir=v010_dir)
        older = older_requests(self.changed, queries)
        for qid, record in older.items():
            del self.changed[qid]
            query = queries[qid]
            self.current[qid] = replace(record, gold=query.gold, category=query.category)
        return older

    @property
    def waiting(self) -> dict[str, Record]:
        """Answers of this run's queries that a new answer is to replace (changed, unchecked)."""
        return {**self.changed, **self.unchecked}

    def kept_lines(self, order: Iterable[str]) -> list[Record]:
        """What records.jsonl keeps before anything is asked: this run's answers, current or waiting,
        in query order, then the outside records (errors are dropped: they are asked again)."""
        mine = {**self.waiting, **self.current}
        return [mine[qid] for qid in order if qid in mine] + self.outside

    def final_lines(self, order: Iterable[str], scored: Iterable[Record]) -> list[Record]:
        """records.jsonl after the run: each query's scored record in query order, except that a
        waiting answer stays until a new *answer* replaces it (a failed re-ask is no answer), then
        the outside records."""
        latest = self.waiting
        latest.update((r.query_id, r) for r in scored if r.error is None or r.query_id not in latest)
        return [latest[qid] for qid in order if qid in latest] + self.outside

    def unscored(self, scored: Iterable[Record]) -> list[str]:
        """Query ids of the records kept in records.jsonl but not scored: the outside ones, and waiting
        answers that no new answer replaced."""
        answered = {r.query_id for r in scored if r.error is None}
        return [r.query_id for r in self.outside] + [qid for qid in self.waiting if qid not in answered]


def older_requests(changed: Mapping[str, Record], queries: Mapping[str, Query], *,
                   v010_dir: bool = False) -> dict[str, Record]:
    """The changed answers 0.1.0 was asked for today's question, only worded or prepared differently
    (0.1 sent its own prompt layouts, translations and image sizes): paid for and kept unless the user
    asks again (--reask). Only records marked `asked_with` 0.1, or any record of a directory 0.1.0
    wrote that is not marked yet (`v010_dir`, see `may_hold_unmarked_v010`); a record whose prompt does
    not hold today's question text answered another question: it is asked again."""
    out = {}
    for qid, record in changed.items():
        if record.asked_with != V010 and not (v010_dir and record.asked_with is None):
            continue
        question = queries[qid].meta.get("question")
        if isinstance(question, str) and question.strip() and question.strip() in record.prompt:
            out[qid] = record
    return out


def may_hold_unmarked_v010(run_dir: Path, *, v010_config: bool, records: Iterable[Record]) -> bool:
    """Whether the unmarked records of a run directory may be 0.1.0's: its config.json was 0.1.0's
    (`v010_config`), or an earlier evalkit kept 0.1.0 answers in it (its summary.json says so) and
    never marked them (no record is marked). Today's answers are never marked, and never 0.1.0's."""
    if v010_config:
        return True
    try:
        summary = json.loads((run_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("requests") == OLDER_REQUESTS and \
        not any(r.asked_with for r in records)


def sort_records(queries: Mapping[str, Query], existing: Mapping[str, Record], keys_of: KeysOf) -> Resume:
    """Blocking (keys hash image bytes): call it in a thread. `keys_of` raising for a query (an
    unreadable image) puts its record in `unchecked`."""
    out = Resume()
    for qid, record in existing.items():
        query = queries.get(qid)
        if query is None:
            out.outside.append(record)
        elif record.error is not None:
            out.errors[qid] = record
        else:
            try:
                keys = keys_of(with_budget(query, record.max_tokens))  # a re-asked cut-off: its budget
            except Exception:  # noqa: BLE001 - asking it again reports the error as that query's own
                out.unchecked[qid] = record
                continue
            if record.request_key not in keys:
                out.changed[qid] = record
            elif record.gold == query.gold and record.category == query.category:
                out.current[qid] = record
            else:  # (dataclasses.replace costs more than the key: only where something differs)
                out.current[qid] = replace(record, gold=query.gold, category=query.category)
    return out


async def sort_records_off_loop(queries: Mapping[str, Query], existing: Mapping[str, Record],
                                keys_of: KeysOf) -> Resume:
    """`sort_records` in a thread, so the event loop stays free (the key of every kept record reads
    its images' hashes)."""
    if not existing:
        return Resume()
    return await asyncio.to_thread(sort_records, queries, existing, keys_of)


def spec_of_identity(identity: Mapping[str, Any]) -> ProviderSpec:
    """The provider spec a run was asked through, as far as its request keys go (provider, model and
    endpoint as its identity saved them): what `evalkit report` needs to check keys, no API key."""
    provider, _, model = str(identity.get("model", "")).partition("/")
    endpoint = str(identity.get("endpoint") or "")
    if endpoint.startswith("tag:"):
        return ProviderSpec(provider, model, (), cache_tag=endpoint[len("tag:"):])
    return ProviderSpec(provider, model, tuple(u for u in endpoint.split(",") if u))


class KeyOnlyProvider:
    """Stands in for a provider where only request keys are computed (`Runner.keys_of` reads
    `provider.spec` alone); it is never asked anything."""

    def __init__(self, spec: ProviderSpec):
        self.spec = spec
