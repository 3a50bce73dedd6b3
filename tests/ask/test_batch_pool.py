"""The batch pool against an in-memory batch API: forming, limits, resume, reconcile, failures."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from evalkit.ask.batch.journal import BatchJournal, read_events, replay
from evalkit.ask.batch.pool import BatchPool, NotWaiting
from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, Response, Usage
from evalkit.providers.base import ProviderSpec
from evalkit.providers.batch_api import BatchGone, BatchLimits, BatchLine, BatchStatus


@dataclass
class FakeBatches:
    """A provider's batch API in memory: batches end when `finish()` says so."""

    provider: str = "openai"
    limits: BatchLimits = field(default_factory=lambda: BatchLimits(1000, 10**9, "test"))
    batches: dict[str, dict] = field(default_factory=dict)
    fail: set[str] = field(default_factory=set)  # prompts whose line errors (transient)
    auto_end: bool = True
    submitted_lines: list[str] = field(default_factory=list)

    def line(self, messages, params, images) -> BatchLine:
        return BatchLine.of({"prompt": messages})

    async def submit(self, lines, tag) -> str:
        bid = f"batch_{len(self.batches)}"
        self.batches[bid] = {"tag": tag, "lines": list(lines), "state": "ended" if self.auto_end else "running"}
        self.submitted_lines += [x.body["prompt"] for x in lines]
        return bid

    def finish(self) -> None:
        for b in self.batches.values():
            b["state"] = "ended"

    async def status(self, batch_id) -> BatchStatus:
        if batch_id not in self.batches:
            raise BatchGone(batch_id)
        b = self.batches[batch_id]
        return BatchStatus(batch_id, b["state"], total=len(b["lines"]), provider_state=b["state"], tag=b["tag"])

    async def results(self, batch_id) -> dict[str, Response]:
        out = {}
        for x in self.batches[batch_id]["lines"]:
            prompt = x.body["prompt"]
            out[x.custom_id] = (Response(error="transient", error_message="overloaded") if prompt in self.fail
                                else Response(text=f"answer to {prompt}", usage=Usage(10, 1)))
        return out

    async def find(self, tag, custom_ids, since) -> list[BatchStatus]:
        return [await self.status(bid) for bid, b in self.batches.items() if b["tag"] == tag]

    async def cancel(self, batch_id) -> None:
        self.batches[batch_id]["state"] = "cancelled"


class Live:
    spec = ProviderSpec("openai", "gpt-test")

    def describe_params(self, params):
        return {}


def _pool(api: FakeBatches, tmp_path, **kw) -> BatchPool:
    return BatchPool(Live(), api, BatchJournal(tmp_path), settle_s=0.01, poll_s=(0.01, 0.02), **kw)


async def _submitted(api: FakeBatches, tmp_path, batches: int = 1) -> None:
    """Return once `batches` batches are with the provider and recorded in the journal: the event the
    tests below wait for (a fixed sleep would race a busy machine)."""
    async def recorded() -> None:
        while len(api.batches) < batches or sum(
                e.get("event") == "submitted" for e in read_events(tmp_path / "batches.jsonl")) < batches:
            await asyncio.sleep(0.005)

    await asyncio.wait_for(recorded(), 60)


async def _ask(pool: BatchPool, prompts: list[str]) -> list[Response | BaseException]:
    return await asyncio.gather(*(pool.complete(p, GenParams(), []) for p in prompts), return_exceptions=True)


def test_requests_become_one_batch_and_come_back_as_answers(tmp_path):
    api = FakeBatches()
    answers = asyncio.run(_ask(_pool(api, tmp_path), ["a", "b", "c"]))
    assert [r.text for r in answers] == ["answer to a", "answer to b", "answer to c"]
    assert {r.via for r in answers} == {"batch"}
    assert len(api.batches) == 1 and sorted(api.submitted_lines) == ["a", "b", "c"]
    kinds = [e["event"] for e in read_events(tmp_path / "batches.jsonl")]
    assert kinds[:2] == ["intent", "submitted"] and "state" in kinds  # intent written before the provider was asked


def test_batches_are_split_within_the_provider_limits(tmp_path):
    api = FakeBatches(limits=BatchLimits(3, 10**9, "test"))
    answers = asyncio.run(_ask(_pool(api, tmp_path), [f"q{i}" for i in range(7)]))
    assert all(isinstance(r, Response) and r.ok for r in answers)
    assert sorted(len(b["lines"]) for b in api.batches.values()) == [1, 3, 3]


def test_twin_requests_share_one_line(tmp_path):
    api = FakeBatches()
    answers = asyncio.run(_ask(_pool(api, tmp_path), ["same", "same", "other"]))
    assert [r.text for r in answers] == ["answer to same", "answer to same", "answer to other"]
    assert sorted(api.submitted_lines) == ["other", "same"]


def test_a_resumed_run_collects_the_pending_batch_and_submits_nothing(tmp_path):
    api = FakeBatches(auto_end=False)

    async def first_run():
        pool = _pool(api, tmp_path)
        tasks = [asyncio.ensure_future(pool.complete(p, GenParams(), [])) for p in ("a", "b")]
        await _submitted(api, tmp_path)  # submitted, polling: then the process goes away
        await pool.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(first_run())
    assert len(api.batches) == 1
    api.finish()  # it ended while nobody watched
    answers = asyncio.run(_ask(_pool(api, tmp_path), ["a", "b"]))
    assert [r.text for r in answers] == ["answer to a", "answer to b"]
    assert len(api.batches) == 1 and len(api.submitted_lines) == 2  # nothing submitted again


def test_a_kill_between_submission_and_its_record_is_reconciled_by_tag(tmp_path):
    api = FakeBatches()
    journal = BatchJournal(tmp_path)
    line = api.line("a", GenParams(), [])
    journal.intent("evalkit-t-1", "openai", [line.custom_id])
    asyncio.run(api.submit([line], "evalkit-t-1"))  # the provider has it; the journal does not know its id
    answers = asyncio.run(_ask(_pool(api, tmp_path), ["a"]))
    assert answers[0].text == "answer to a" and len(api.submitted_lines) == 1
    assert replay(read_events(tmp_path / "batches.jsonl"))["evalkit-t-1"].batch_id == "batch_0"


def test_an_intent_the_provider_never_received_is_submitted_again(tmp_path):
    api = FakeBatches()
    journal = BatchJournal(tmp_path)
    journal.intent("evalkit-t-1", "openai", [api.line("a", GenParams(), []).custom_id])
    answers = asyncio.run(_ask(_pool(api, tmp_path), ["a"]))
    assert answers[0].text == "answer to a" and api.submitted_lines == ["a"]
    assert BatchJournal(tmp_path).batches["evalkit-t-1"].state == "lost"


def test_a_failed_line_is_a_classified_error_and_the_retry_is_a_new_batch(tmp_path):
    api = FakeBatches(fail={"b"})

    async def go():
        pool = _pool(api, tmp_path)
        first = await _ask(pool, ["a", "b"])
        api.fail.clear()
        again = await pool.complete("b", GenParams(), [])
        return first, again

    first, again = asyncio.run(go())
    assert first[0].text == "answer to a"
    assert isinstance(first[1], ProviderError) and first[1].kind == "transient"
    assert again.text == "answer to b" and api.submitted_lines == ["a", "b", "b"] and len(api.batches) == 2


def test_a_batch_the_provider_forgot_is_reported_and_its_lines_submitted_again(tmp_path):
    api = FakeBatches(auto_end=False)

    async def first_run():
        pool = _pool(api, tmp_path)
        task = asyncio.ensure_future(pool.complete("a", GenParams(), []))
        await _submitted(api, tmp_path)
        await pool.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(first_run())
    api.batches.clear()  # the provider no longer knows it
    api.auto_end = True

    async def second_run():
        pool = _pool(api, tmp_path)
        first = await _ask(pool, ["a"])
        return first, await pool.complete("a", GenParams(), []), pool.stats.notes

    first, again, notes = asyncio.run(second_run())
    assert isinstance(first[0], ProviderError)  # the runner's retry policy resubmits it
    assert again.text == "answer to a" and api.submitted_lines == ["a", "a"]
    assert len(notes) == 1 and "no longer known" in notes[0]


def test_no_wait_submits_and_leaves(tmp_path):
    api = FakeBatches(auto_end=False)
    answers = asyncio.run(_ask(_pool(api, tmp_path, wait=False), ["a", "b"]))
    assert all(isinstance(r, NotWaiting) for r in answers)
    assert sorted(api.submitted_lines) == ["a", "b"]
    api.finish()
    answers = asyncio.run(_ask(_pool(api, tmp_path, wait=False), ["a", "b"]))  # ended: collected, not waited for
    assert [r.text for r in answers] == ["answer to a", "answer to b"] and len(api.submitted_lines) == 2


def test_a_torn_journal_line_is_skipped(tmp_path):
    journal = BatchJournal(tmp_path)
    journal.intent("t1", "openai", ["ek-1"])
    journal.submitted("t1", "b1")
    with (tmp_path / "batches.jsonl").open("ab") as f:
        f.write(b'{"event":"state","batch_id":"b1","sta')
    again = BatchJournal(tmp_path)
    assert again.batches["t1"].batch_id == "b1" and again.batches["t1"].state == "running"


@pytest.mark.parametrize("state", ["expired", "cancelled"])
def test_lines_of_a_batch_that_ended_without_them_are_transient_errors(tmp_path, state):
    api = FakeBatches(auto_end=False)

    async def go():
        pool = _pool(api, tmp_path)
        task = asyncio.ensure_future(pool.complete("a", GenParams(), []))
        await _submitted(api, tmp_path)  # (a fixed 50 ms hung a busy machine: the batch came after it)
        for b in api.batches.values():
            b["state"] = state
            b["lines"] = []  # no results for it
        return await asyncio.gather(task, return_exceptions=True)

    (result,) = asyncio.run(go())
    assert isinstance(result, ProviderError) and result.kind == "transient" and state in result.message


def test_batch_timeout_leaves_pending_lines_for_a_later_run_without_resubmitting(tmp_path):
    api = FakeBatches(auto_end=False)
    answers = asyncio.run(_ask(_pool(api, tmp_path, timeout_s=0.2), ["a", "b"]))
    assert all(isinstance(r, NotWaiting) for r in answers)  # not recorded: the run is incomplete, resumable
    assert len(api.batches) == 1
    api.finish()
    answers = asyncio.run(_ask(_pool(api, tmp_path, timeout_s=0.2), ["a", "b"]))
    assert [r.text for r in answers] == ["answer to a", "answer to b"] and len(api.submitted_lines) == 2


def test_the_status_line_says_batches_waiting_and_the_providers_word(tmp_path):
    api = FakeBatches(auto_end=False)

    async def go():
        pool = _pool(api, tmp_path)
        tasks = [asyncio.ensure_future(pool.complete(p, GenParams(), [])) for p in ("a", "b", "c")]
        await _submitted(api, tmp_path)

        async def polled() -> None:  # the provider's word comes with the first status poll after submitting
            while not pool.stats.states:
                await asyncio.sleep(0.005)

        await asyncio.wait_for(polled(), 60)
        line = pool.status_line()
        await pool.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return line

    assert asyncio.run(go()) == "batches 1 · waiting 3 · running"


def test_max_cost_is_checked_at_submission_against_the_worst_case(tmp_path):
    from evalkit.ask.outcome import NotSent

    api = FakeBatches()
    spent = [0.0]
    pool = BatchPool(Live(), api, BatchJournal(tmp_path), settle_s=0.01, poll_s=(0.01, 0.02),
                     cost_of=lambda m, p, i: 1.0, budget_left=lambda: 2.5 - spent[0])
    answers = asyncio.run(_ask(pool, ["a", "b", "c"]))
    assert [type(r).__name__ for r in answers].count("Response") == 2
    assert sum(isinstance(r, NotSent) for r in answers) == 1 and pool.stats.over_budget == 1
    assert len(api.submitted_lines) == 2  # the third would pass the budget: never submitted
