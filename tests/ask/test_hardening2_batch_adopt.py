"""An Anthropic batch left unrecorded by a kill is adopted only once its results show it is this run's.

Message batches carry no metadata, so before a batch has ended nothing tells whose it is. evalkit took
the newest batch in progress created since the intent with as many requests: run A, killed between
creating its batch and recording it, adopted run B's batch (same request count) and left its own
orphaned but billed. Now a candidate batch is waited for until it ends and adopted only if its
results hold exactly the intent's custom ids; meanwhile nothing is submitted again. Through the CLI
and the real SDK against the simulated Message Batches API.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass

import pytest
from cli_under_test import run_cli, start_cli
from synthetic_data import make_mcq_jsonl
from test_batch_kill import DIE_AFTER_SUBMIT
from test_batch_pool import FakeBatches, _ask, _pool

from evalkit.ask.batch.journal import JOURNAL, BatchJournal, read_events
from evalkit.ask.batch.pool import NotWaiting
from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, Message
from evalkit.providers import create_batch_api, create_provider, parse_spec
from evalkit.providers.batch_api import BatchStatus, BatchUndecided
from evalkit.sim.answerkey import AnswerKey
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

ENV = {"ANTHROPIC_API_KEY": "sk-ant-test"}
MODEL = "anthropic/sim-model"
N = 6
LIST = "/v1/messages/batches"


def _lines(api, prefix: str) -> list:  # noqa: ANN001
    return [api.line([Message.user(f"{prefix} question {i}?")], GenParams(max_tokens=8), []) for i in range(N)]


async def test_find_waits_for_a_running_batch_and_adopts_only_the_one_holding_its_ids():
    with SimThread(SimConfig()) as sim:
        sim.batches.behaviour.frozen = True
        live = create_provider(parse_spec(MODEL, [sim.url], ENV), ENV)
        api = create_batch_api(live, ENV)
        try:
            since = time.time()
            mine, theirs, other = _lines(api, "mine"), _lines(api, "theirs"), _lines(api, "other")
            mine_id = await api.submit(mine, "evalkit-a")
            theirs_id = await api.submit(theirs, "evalkit-b")  # newer, as many requests: listed first
            with pytest.raises(BatchUndecided) as undecided:
                await api.find("evalkit-a", [x.custom_id for x in mine], since)
            assert set(undecided.value.candidates) == {mine_id, theirs_id}
            with pytest.raises(BatchUndecided):  # a batch nobody created: nothing is taken for it either
                await api.find("evalkit-c", [x.custom_id for x in other], since)
            sim.batches.behaviour.frozen = False
            found = await api.find("evalkit-a", [x.custom_id for x in mine], since)
            assert [s.id for s in found] == [mine_id] and found[0].state == "ended"
            assert await api.find("evalkit-c", [x.custom_id for x in other], since) == []  # never created
            assert sim.batches.counts["batches"] == 2
        finally:
            await api.close()
            await live.close()


def _args(sim: SimThread, tmp_path, name: str, *extra: str) -> list[str]:  # noqa: ANN001
    return ["run", "mcq", "--model", MODEL, "--data", str(tmp_path / name / "data.jsonl"), "--base-url", sim.url,
            "--out", str(tmp_path / f"run-{name}"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
            "--prices", str(tmp_path / "prices.json"), "--batch", *extra]


def _events(tmp_path, name: str) -> list[dict]:  # noqa: ANN001
    return read_events(tmp_path / f"run-{name}" / JOURNAL)


def _two_runs(tmp_path) -> SimConfig:  # noqa: ANN001
    """Runs A and B: different questions, as many of them (so their batches have as many requests)."""
    a = make_mcq_jsonl(tmp_path / "a", N, seed=9)
    b = make_mcq_jsonl(tmp_path / "b", N, seed=10)
    (tmp_path / "prices.json").write_text(json.dumps({MODEL: {"input": 3.0, "output": 15.0}}))
    key_a = answer_key_for("mcq", {"data": str(a)})
    key_b = answer_key_for("mcq", {"data": str(b)})
    return SimConfig(answer_key=AnswerKey([*key_a.entries, *key_b.entries]))


def _a_killed_then_b_submitted(sim: SimThread, tmp_path) -> tuple[str, str]:  # noqa: ANN001
    """A dies between creating its batch and recording it; B then submits its own (with --no-wait).
    Both batches are in progress. Returns (A's batch id, B's)."""
    sim.batches.behaviour.frozen = True
    died = run_cli(_args(sim, tmp_path, "a"), env=ENV, cwd=tmp_path, prelude=DIE_AFTER_SUBMIT)
    assert died.returncode == 137, died.stdout + died.stderr
    assert [e["event"] for e in _events(tmp_path, "a")] == ["intent"]
    b = run_cli(_args(sim, tmp_path, "b", "--no-wait"), env=ENV, cwd=tmp_path)
    assert b.returncode == 1, b.stdout + b.stderr
    a_id, b_id = list(sim.batches.batches)
    assert [e.get("batch_id") for e in _events(tmp_path, "b") if e["event"] == "submitted"] == [b_id]
    return a_id, b_id


def _lists(sim: SimThread) -> int:
    return sum(h.method == "GET" and h.path == LIST for h in sim.heard)


def _check_a_done(sim: SimThread, tmp_path, a_id: str) -> None:  # noqa: ANN001
    assert [e.get("batch_id") for e in _events(tmp_path, "a") if e["event"] == "submitted"] == [a_id]
    assert not any(e["event"] == "lost" for e in _events(tmp_path, "a"))
    assert sim.batches.counts["batches"] == 2 and sim.batches.counts["lines"] == 2 * N  # nothing paid twice
    summary = json.loads((tmp_path / "run-a" / "summary.json").read_text())
    assert summary["metrics"]["accuracy"] == 100.0 and summary["missing"] == 0


@pytest.mark.slow
def test_an_undecided_batch_is_left_with_no_wait_then_waited_for_and_never_another_runs_taken(tmp_path):
    """A dies between creating its batch and recording it; B submits its own. A resumed with --no-wait
    leaves its queries and says why; resumed without, it waits for the batches to end and adopts its own."""
    with SimThread(_two_runs(tmp_path)) as sim:
        a_id, b_id = _a_killed_then_b_submitted(sim, tmp_path)
        left = run_cli(_args(sim, tmp_path, "a", "--no-wait"), env=ENV, cwd=tmp_path)
        assert left.returncode == 1, left.stdout + left.stderr
        said = " ".join((left.stdout + left.stderr).split())
        assert "batches carry no tag" in said and a_id in said and b_id in said
        assert [e["event"] for e in _events(tmp_path, "a")] == ["intent"]  # neither taken nor given up
        assert sim.batches.counts["batches"] == 2
        before = _lists(sim)
        child = start_cli(_args(sim, tmp_path, "a"), env=ENV, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while _lists(sim) < before + 2:  # looked once, then asked again: it waits for the batches to end
            assert child.poll() is None, child.communicate()
            assert [e["event"] for e in _events(tmp_path, "a")] == ["intent"], _events(tmp_path, "a")  # none taken
            assert time.monotonic() < deadline, "the resumed run never asked the provider again"
            time.sleep(0.02)
        assert sim.batches.counts["batches"] == 2  # nothing submitted while it cannot tell
        assert [e["event"] for e in _events(tmp_path, "a")] == ["intent"]
        sim.batches.behaviour.frozen = False
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, out + err
        assert f"batch {a_id} ended holding exactly the {N} requests" in " ".join((out + err).split())
        _check_a_done(sim, tmp_path, a_id)


# ---- the pool's side, against an in-memory batch API ------------------------------------------------


@dataclass
class Untagged(FakeBatches):
    """A batch API whose find() cannot tell while `unsure` (a candidate runs), and whose list may fail."""

    unsure: bool = True
    list_failures: int = 0  # find() calls that fail (the list did not answer) before it answers
    finds: int = 0
    create_fails: bool = False  # create raises after the provider took the batch (a cut connection)

    async def submit(self, lines, tag) -> str:  # noqa: ANN001
        bid = await super().submit(lines, tag)
        if self.create_fails:
            raise ProviderError("transient", "connection reset while creating the batch")
        return bid

    async def find(self, tag, custom_ids, since) -> list[BatchStatus]:  # noqa: ANN001
        self.finds += 1
        if self.list_failures:
            self.list_failures -= 1
            raise ProviderError("transient", "the list did not answer")
        if self.unsure:
            raise BatchUndecided(["theirs"])
        return [await self.status(bid) for bid, b in self.batches.items() if b["tag"] == tag]


async def _until(check, what: str) -> None:  # noqa: ANN001
    async def loop() -> None:
        while not check():
            await asyncio.sleep(0.005)

    try:
        await asyncio.wait_for(loop(), 60)
    except asyncio.TimeoutError:
        raise AssertionError(f"never: {what}") from None


def test_lines_of_an_undecided_intent_wait_and_are_submitted_once_no_batch_holds_them(tmp_path):
    api = Untagged(provider="anthropic")
    BatchJournal(tmp_path).intent("evalkit-t-1", "anthropic", [api.line(p, GenParams(), []).custom_id
                                                                for p in ("a", "b")])

    async def go() -> tuple[list, str | None]:
        pool = _pool(api, tmp_path)
        asked = asyncio.ensure_future(_ask(pool, ["a", "b", "c"]))
        await _until(lambda: api.finds >= 3 and api.batches, "polled while another batch runs")
        assert api.submitted_lines == ["c"]  # the others wait: their batch may be the running one
        line = pool.status_line()
        api.unsure = False  # it ended, and holds other requests: theirs was never created
        answers = await asyncio.wait_for(asked, 60)
        await pool.close()
        return answers, line

    answers, line = asyncio.run(go())
    assert [r.text for r in answers] == ["answer to a", "answer to b", "answer to c"]
    # a and b wait; c waits too until its ended batch's results are collected (a busy machine sees that)
    assert line is not None and re.search(r"waiting [23] ", line), line
    assert "1 unrecorded batch(es) checked when they end" in line
    assert sorted(api.submitted_lines) == ["a", "b", "c"] and len(api.batches) == 2
    assert BatchJournal(tmp_path).batches["evalkit-t-1"].state == "lost"


def test_with_no_wait_the_lines_of_an_undecided_intent_are_left_and_the_intent_kept(tmp_path):
    api = Untagged(provider="anthropic")
    BatchJournal(tmp_path).intent("evalkit-t-1", "anthropic", [api.line("a", GenParams(), []).custom_id])

    async def go() -> list:
        pool = _pool(api, tmp_path, wait=False)
        answers = await _ask(pool, ["a"])
        await pool.close()
        return answers

    answers = asyncio.run(go())
    assert isinstance(answers[0], NotWaiting) and api.submitted_lines == []
    assert BatchJournal(tmp_path).batches["evalkit-t-1"].state == "intent"


def test_a_create_that_failed_but_arrived_is_found_even_when_the_list_fails_first(tmp_path):
    api = Untagged(unsure=False, list_failures=2, create_fails=True)
    answers = asyncio.run(_ask(_pool(api, tmp_path), ["a", "b"]))
    assert [r.text for r in answers] == ["answer to a", "answer to b"]
    assert len(api.batches) == 1 and sorted(api.submitted_lines) == ["a", "b"]  # never created twice
    assert [e["event"] for e in read_events(tmp_path / JOURNAL)][:2] == ["intent", "submitted"]
