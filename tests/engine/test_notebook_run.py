"""`evalkit.run()` where researchers write it: inside a running event loop (a notebook cell).

It used to raise asyncio's "asyncio.run() cannot be called from a running event loop" there. Now the
run goes on a worker thread with its own loop and returns the same result; interrupting the cell
(KeyboardInterrupt in the waiting thread) stops the worker's run as Ctrl-C does: the replies on their
way are received and recorded, no thread is left running, and the same call again sends only what is
missing. `quiet=True` prints nothing at all.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading

import pytest
from synthetic_data import make_mcq_jsonl
from waiting import DEADLINE_S, wait_until_held, wait_until_idle

import evalkit
from evalkit.engine.stopping.shutdown import INTERRUPTER
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 16


@pytest.fixture(scope="module")
def sim_and_data(tmp_path_factory):
    data = make_mcq_jsonl(tmp_path_factory.mktemp("ds"), N, seed=5, image_size=32)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        yield sim, data


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt, as in a notebook's kernel, also where the tests were started with it
    ignored (`pytest &` in a script: a background job inherits SIGINT ignored, and the run rightly leaves an
    ignored SIGINT ignored, so the test's interrupts would never be heard)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _options(sim, data, tmp_path, name: str) -> dict:
    return {"data": str(data), "base_url": sim.url, "out": str(tmp_path / name), "cache_dir": str(tmp_path / f"c-{name}"),
            "concurrency": 2, "plots": False, "progress": False, "group_images": False}


def _run_threads() -> set[threading.Thread]:
    """Every thread but the simulator's (the test's server, which may start image threads as it serves)."""
    return {t for t in threading.enumerate() if not t.name.startswith("evalkit-sim")}


def _sent(sim) -> int:
    wait_until_idle(sim)
    return sim.counters.snapshot()["requests"]


def test_run_inside_a_running_loop_equals_the_run_outside_and_prints_nothing_when_quiet(sim_and_data, tmp_path,
                                                                                         capfd):
    sim, data = sim_and_data
    outside = evalkit.run("mcq", "vllm/sim-model", **_options(sim, data, tmp_path, "outside"), quiet=True)
    capfd.readouterr()
    before, sent_before = _run_threads(), _sent(sim)

    async def cell():
        assert asyncio.get_running_loop()  # as in a notebook: a loop is running
        return evalkit.run("mcq", "vllm/sim-model", **_options(sim, data, tmp_path, "inside"), quiet=True)

    inside = asyncio.run(cell())
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")  # quiet=True: nothing on stdout or stderr, from any thread
    assert _sent(sim) - sent_before == N  # asked, not read from the other run's cache
    assert _run_threads() == before  # the worker thread and its loop's threads are gone
    assert inside.exit_code == outside.exit_code == 0
    for key in ("metrics", "counts", "n_queries", "complete"):
        assert inside.summary[key] == outside.summary[key], key
    assert inside.summary["counts"]["correct"] == N  # the exact simulated model
    fields = ("query_id", "response", "parsed", "correct", "error")
    assert [[getattr(r, f) for f in fields] for r in inside.records] == \
        [[getattr(r, f) for f in fields] for r in outside.records]
    assert len(inside.to_rows()) == N and all(row["correct"] for row in inside.to_rows())


def test_interrupting_the_cell_drains_the_run_and_the_same_call_resumes(sim_and_data, tmp_path, sigint_raises):
    sim, data = sim_and_data
    options = _options(sim, data, tmp_path, "cut")
    main = threading.main_thread().ident
    seen: list[int] = []

    def interrupt_the_cell_at_the_third_record() -> None:  # the engine's on_record hook, on the worker thread
        seen.append(1)
        if len(seen) == 3:
            told = INTERRUPTER.get()
            assert told is not None  # the run knows whom to listen to
            signal.pthread_kill(main, signal.SIGINT)  # what the notebook's interrupt button does
            assert told.told.wait(120)  # the waiting thread has passed the word on to this run

    async def cell(**hooks):
        return evalkit.run("mcq", "vllm/sim-model", **options, **hooks)

    before, sent_before = _run_threads(), _sent(sim)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cell(on_record=interrupt_the_cell_at_the_third_record, quiet=True))
    assert _run_threads() == before  # no thread left running
    sent_first = _sent(sim) - sent_before
    lines = [json.loads(x) for x in (tmp_path / "cut" / "records.jsonl").read_text().splitlines()]
    answered = {r["query_id"] for r in lines if r["error"] is None}
    assert 3 <= sent_first < N  # stopped mid-run: no new request after the interrupt
    assert len(answered) == sent_first  # every reply on its way was received and recorded

    again = asyncio.run(cell(quiet=True))  # the same cell, run again: resumes
    assert again.exit_code == 0 and again.summary["complete"]
    assert _sent(sim) - sent_before == N  # only the missing queries were sent
    assert again.summary["this_run"] == {"sent": N - sent_first, "from_cache": 0, "already": sent_first,
                                         "cost_usd": None}
    assert len(again.records) == N and again.summary["counts"]["correct"] == N


def test_a_second_interrupt_stops_at_once_and_leaves_no_thread(sim_and_data, tmp_path, sigint_raises):
    """The replies on their way are held at the server: the first interrupt waits for them (drain), the
    second stops the run at once; the worker still ends before the cell does.

    The interrupts wait for two events: the run has recorded three replies (its on_record hook), and the
    next request is held at the server. The second alone is not enough: the third reply has passed the
    server's gate by then, but may still be on its way (being written, or unread in the client's buffer),
    and a second interrupt rightly does not wait for it (on a busy machine the run then recorded 2)."""
    sim, data = sim_and_data
    options = _options(sim, data, tmp_path, "twice")
    main = threading.main_thread().ident
    interrupters: list = []
    three_recorded = threading.Event()
    failures: list[BaseException] = []

    def note_the_interrupter() -> None:  # the engine's on_record hook, on the worker thread
        interrupters.append(INTERRUPTER.get())
        if len(interrupters) == 3:
            three_recorded.set()

    def interrupt_twice() -> None:
        try:
            assert three_recorded.wait(DEADLINE_S), f"{len(interrupters)} replies recorded after {DEADLINE_S} s"
            wait_until_held(sim, None, 1)  # three replies are in; the next is held at the server, on its way
            signal.pthread_kill(main, signal.SIGINT)
            assert interrupters[0] is not None and interrupters[0].told.wait(DEADLINE_S)
            signal.pthread_kill(main, signal.SIGINT)  # the drain waits for the held reply: stop at once
        except BaseException as e:  # noqa: BLE001 - said by the test
            failures.append(e)
            sim.release()  # the run then ends by itself: the test fails with this reason instead of hanging

    async def cell(**hooks):
        return evalkit.run("mcq", "vllm/sim-model", **options, **hooks)

    before, sent_before = _run_threads(), _sent(sim)
    interrupter = threading.Thread(target=interrupt_twice, name="test-interrupts")
    sim.hold(after=3)
    ended: BaseException | None = None
    try:
        interrupter.start()
        try:
            asyncio.run(cell(on_record=note_the_interrupter, quiet=True))
        except KeyboardInterrupt as e:
            ended = e
        interrupter.join()
    finally:
        sim.release()
    assert not failures, failures
    assert isinstance(ended, KeyboardInterrupt)
    assert _run_threads() == before  # stopped at once, and still no thread left running
    assert len(interrupters) == 3  # nothing more was received: the fourth reply was still held
    lines = [json.loads(x) for x in (tmp_path / "twice" / "records.jsonl").read_text().splitlines()]
    assert len({r["query_id"] for r in lines if r["error"] is None}) == 3  # what had arrived is on disk
    sent_first = _sent(sim) - sent_before
    again = asyncio.run(cell(quiet=True))
    assert again.exit_code == 0 and again.summary["this_run"]["already"] == 3
    assert _sent(sim) - sent_before == sent_first + N - 3  # the re-run asks the missing queries only


def test_claims_still_held_are_released_when_a_run_closes(tmp_path):
    """A run stopped mid-request in a process that lives on (a notebook's kernel) closes its claims: the
    same call again claims those keys at once instead of waiting minutes for them to lapse (the process,
    hence the claim's owner, is still alive)."""
    from evalkit.ask.claims import LocalClaims

    stopped, again = LocalClaims(tmp_path, ttl_s=330.0), LocalClaims(tmp_path, ttl_s=330.0)
    assert stopped.claim("in-flight") and stopped.claim("answered") and stopped.claim("released")
    stopped.done("answered")  # its answer is stored: whoever waits finds it, the claim may lapse
    stopped.release("released")
    assert not again.claim("in-flight")  # held by a live owner
    stopped.close()
    assert again.claim("in-flight") and again.claim("released")
    assert not again.claim("answered")  # left to lapse, as before (its answer is in the cache)
    again.close()
