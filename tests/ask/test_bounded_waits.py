"""A server's Retry-After cannot stall a run, and a 429 delays only the request it refused.

The parser and the retry policy are tested on their own (test_retry_after_header.py, and
test_retry_policy_waits.py on virtual time); here, whole runs against the simulator in this process, for
each provider: the `evalkit` command in a child process, and run() in this process with the runner's
clock in the test's hands (each retry's wait recorded, or held until the test lets it go), so that an
order of events is proven by waiting for the events, not by timing. Under
EVALKIT_UNDER_TEST=<a 0.1.0 checkout> every command-line test fails: the huge Retry-After hangs the
run past the test's timeout, and a 429 pauses the whole client, so the other queries are not answered
while the refused one waits.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from pathlib import Path

import pytest
from cli_under_test import run_cli, start_cli
from provider_runs import KEYS, assert_all_answered, in_process, pointed_at, run_against
from synthetic_data import make_mcq_jsonl

from evalkit.ask.rate_limiter import Limiter
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread

# ---- the command line, each provider against the simulator -----------------------------------------

CAP_S = 0.2  # --max-retry-after in the tests below: each refused request waits this long at most


@functools.cache
def cap_flag() -> tuple[str, ...]:
    """--max-retry-after CAP_S, where the command has it. 0.1.0 has no such flag and would stop at once
    with a usage error; without it, the run shows what the flag is for: it never ends."""
    helped = run_cli(["run", "mcq", "--help"], timeout=60)
    return ("--max-retry-after", str(CAP_S)) if "--max-retry-after" in helped.stdout else ()


SMALL, LARGE = 12, 40


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> tuple[Path, object]:
    data = make_mcq_jsonl(tmp_path_factory.mktemp("bounded-small"), SMALL, seed=12)
    return data, answer_key_for("mcq", {"data": str(data)})


@pytest.fixture(scope="module")
def large_set(tmp_path_factory) -> tuple[Path, object]:
    data = make_mcq_jsonl(tmp_path_factory.mktemp("bounded-large"), LARGE, seed=13)
    return data, answer_key_for("mcq", {"data": str(data)})


HUGE = [(p, {"retry_after": 999999.0}) for p in sorted(KEYS)] + [
    # retry-after-ms: inf, as a misbehaving proxy sends it (each provider's header reading is unit-tested
    # in test_retry_after_header and test_providers; Gemini's wire carries no such header)
    ("vllm", {"retry_after": None, "retry_after_ms": "inf"})]
HUGE_IDS = [f"{p}-{a.get('retry_after_ms') or 'huge'}" for p, a in HUGE]


@pytest.mark.parametrize("provider, advertised", HUGE, ids=HUGE_IDS)
def test_a_huge_retry_after_is_capped(tmp_path, small_set, provider, advertised):
    """30 % of requests refused with Retry-After 999999 s (or retry-after-ms inf): with --max-retry-after 0.2
    the run ends, every query answered, each refusal retried once and every attempt the run counted is one
    the server saw (no hidden SDK retry). The exact waits are checked on a recording clock below."""
    data, key = small_set
    faults = SimFaults(rate=0.3, kinds=("429",), seed=4, **advertised)
    with SimThread(SimConfig(answer_key=key, faults=faults)) as sim:
        done, _ = run_against(sim, provider, data, tmp_path, *cap_flag(), timeout=180)  # uncapped: never ends
        counters = sim.counters.snapshot()
    assert_all_answered(done, tmp_path / "run", SMALL)
    assert counters["rate_limited"] >= 3 and counters["completions"] == SMALL
    assert counters["requests"] == SMALL + counters["rate_limited"]  # each refusal retried, once
    speed = json.loads((tmp_path / "run" / "summary.json").read_text())["throughput"]
    assert (speed["requests"], speed["rate_limited"], speed["retries"]) == (
        counters["requests"], counters["rate_limited"], counters["rate_limited"])
    # The bound is the behaviour: no refused request waited the default cap (60 s), let alone 999999 s. It is on
    # the ask phase the run measured (its waits included, the child's start-up and SDK imports not): about 1 s
    # here, under 5 s beside four busy processes on two cores; 40 s is 8 times that, and one 60 s wait breaks it.
    assert speed["ask_s"] < 40, speed


# ---- the same runs in this process, with the retry waits on a clock the test holds ---------------------


class HeldClock:
    """The runner's clock (Limiter(clock=...)): real time plus every wait slept so far, where each sleep is
    recorded and, while the clock is held, parked until open(). Thread-safe: the run has its own loop."""

    def __init__(self, held: bool) -> None:
        self._lock = threading.Lock()
        self._skipped = 0.0
        self._held = held
        self._parked: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.waits: list[float] = []

    def now(self) -> float:
        with self._lock:
            return time.monotonic() + self._skipped

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            self.waits.append(seconds)
            self._skipped += max(0.0, seconds)
            if not self._held:
                fut = None
            else:
                fut = loop.create_future()
                self._parked.append((loop, fut))
        if fut is None:
            await asyncio.sleep(0)
        else:
            await fut

    @property
    def parked(self) -> int:
        with self._lock:
            return sum(not fut.done() for _, fut in self._parked)

    def open(self) -> None:
        """Every parked sleep ends, and later ones end at once."""
        with self._lock:
            self._held = False
            parked, self._parked = self._parked, []
        for loop, fut in parked:
            loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))


class RunThread(threading.Thread):
    """run() in a thread of its own (it runs its own event loop); finished() hands back its RunResult."""

    def __init__(self, *args: object, **options: object) -> None:
        super().__init__(daemon=True)
        self._args, self._options = args, options
        self._result: object = None

    def run(self) -> None:
        try:
            self._result = run(*self._args, **self._options)
        except BaseException as e:  # noqa: BLE001 - raised again in the test's thread
            self._result = e

    def finished(self, timeout: float = 120.0):
        self.join(timeout)  # a safety net: these runs take about a second
        assert not self.is_alive(), "the run did not finish"
        if isinstance(self._result, BaseException):
            raise self._result
        return self._result


def run_on_clock(monkeypatch, clock: HeldClock, sim: SimThread, provider: str, data: Path, out: Path,
                 **options: object) -> RunThread:
    """`evalkit run mcq` as run(), started in a thread, its limiter on `clock`; adaptive limits off, so
    that every sleep on the clock is a retry's wait (they may hold everyone briefly: test_adaptive_policy)."""
    monkeypatch.setattr("evalkit.engine.endpoints.wiring.Limiter", functools.partial(Limiter, clock=clock))
    kwargs, env = in_process(provider, sim.url)
    thread = RunThread("mcq", f"{provider}/sim-model", data=str(data), out=str(out / "run"), env=env, no_cache=True,
                       plots=False, progress=False, adaptive=False, **kwargs, **options)
    thread.start()
    return thread


@pytest.mark.parametrize("provider, advertised", HUGE, ids=HUGE_IDS)
def test_each_refused_request_waits_the_cap(monkeypatch, tmp_path, small_set, provider, advertised):
    """The same refusals as above, run() on a clock that records each retry's wait (and skips it): every
    refused request waited exactly --max-retry-after, never the 999999 s it was told, and every attempt the
    run counted is one the server saw."""
    data, key = small_set
    faults = SimFaults(rate=0.3, kinds=("429",), seed=4, **advertised)
    clock = HeldClock(held=False)
    with SimThread(SimConfig(answer_key=key, faults=faults)) as sim:
        res = run_on_clock(monkeypatch, clock, sim, provider, data, tmp_path, max_retry_after=CAP_S).finished()
        counters = sim.counters.snapshot()
    speed = res.summary["throughput"]
    assert speed["rate_limited"] == counters["rate_limited"] >= 3 and speed["requests"] == counters["requests"]
    if advertised["retry_after"] is not None:
        assert clock.waits == [CAP_S] * counters["rate_limited"]
    else:  # retry-after-ms: inf alone is no usable time: the backoff, whose ceiling is 20 s
        assert len(clock.waits) == counters["rate_limited"] and all(0 <= w <= 20 for w in clock.waits)
    assert counters["completions"] == SMALL and counters["requests"] == SMALL + counters["rate_limited"]


@pytest.mark.parametrize("provider", ["vllm", "google"])  # the policy is the runner's; a 429 is one per wire
def test_a_429_without_retry_after_delays_only_its_request(monkeypatch, tmp_path, large_set, provider):
    """40 queries, 8 at a time, some refused with a bare 429. Each refused request backs off on a clock the
    test holds, so it stays refused and waiting for as long as the test likes; meanwhile every other query
    is sent and answered. 0.1.0 paused the whole client a second per 429: on this clock, that pause parks
    everyone, and the others are never answered."""
    data, key = large_set
    faults = SimFaults(rate=0.1, kinds=("429",), retry_after=None, seed=5)
    clock = HeldClock(held=True)
    with SimThread(SimConfig(answer_key=key, faults=faults, latency_s=0.01)) as sim:
        thread = run_on_clock(monkeypatch, clock, sim, provider, data, tmp_path, concurrency=8)
        deadline = time.monotonic() + 120  # a safety net: the event comes in about a second
        while (sim.counters["completions"] + sim.counters["rate_limited"] < LARGE
               or clock.parked < sim.counters["rate_limited"]):  # every first attempt answered, each 429 waiting
            assert time.monotonic() < deadline and thread.is_alive(), (sim.counters.snapshot(), clock.waits)
            time.sleep(0.01)
        first = sim.counters.snapshot()
        parked = clock.parked
        assert thread.is_alive()  # the refused queries are still waiting to be asked again
        clock.open()
        res = thread.finished()
        counters = sim.counters.snapshot()
    refused = first["rate_limited"]
    assert refused >= 3 and first["requests"] == LARGE and first["completions"] == LARGE - refused
    assert parked == refused and len(clock.waits) >= refused
    assert all(0 <= w <= 0.5 for w in clock.waits[:refused])  # the first backoff: uniform below 0.5 s
    assert counters["completions"] == LARGE and counters["requests"] == LARGE + counters["rate_limited"]
    assert res.summary["throughput"]["rate_limited"] == counters["rate_limited"]
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == LARGE and all(r["correct"] for r in records)


@pytest.mark.parametrize("provider", ["vllm", "google"])
def test_while_a_refused_request_waits_the_others_are_answered(tmp_path, large_set, provider):
    """The command itself: refusals tell it to wait 999999 s, --max-retry-after 600 makes that ten minutes.
    The test waits for every other query to be answered while the refused ones wait (0.1.0 stopped the
    whole client for the 999999 s instead: nothing more is answered), sees that no refused query was
    asked again, then ends the run (--no-cache writes each answer as it comes)."""
    data, key = large_set
    faults = SimFaults(rate=0.1, kinds=("429",), retry_after=999999.0, seed=5)
    cap = ("--max-retry-after", "600") if cap_flag() else ()
    with SimThread(SimConfig(answer_key=key, faults=faults, latency_s=0.01)) as sim:
        flags, env = pointed_at(provider, sim.url)
        proc = start_cli(["run", "mcq", "--model", f"{provider}/sim-model", "--data", str(data), "--out",
                          str(tmp_path / "run"), "--no-cache", "--no-progress", "--concurrency", "8", *flags, *cap],
                         env=env, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 120  # a safety net: the event comes in seconds
            while sim.counters["completions"] + sim.counters["rate_limited"] < LARGE:
                assert time.monotonic() < deadline and proc.poll() is None, sim.counters.snapshot()
                time.sleep(0.02)
            refused = sim.counters["rate_limited"]
            while len(read_lines(tmp_path / "run" / "records.jsonl")) < LARGE - refused:  # the answers, written
                assert time.monotonic() < deadline and proc.poll() is None, sim.counters.snapshot()
                time.sleep(0.02)
            seen = sim.counters.snapshot()
            assert proc.poll() is None  # still running: the refused queries wait
        finally:
            proc.kill()
            proc.communicate()
    assert refused >= 3 and seen["rate_limited"] == refused
    assert seen["requests"] == LARGE and seen["completions"] == LARGE - refused  # none asked again yet
    records = [json.loads(line) for line in read_lines(tmp_path / "run" / "records.jsonl")]
    assert len(records) == LARGE - refused and all(r["error"] is None and r["correct"] for r in records)


def read_lines(path: Path) -> list[str]:
    """The complete lines of a file being written (none while it does not exist)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return text[:text.rfind("\n") + 1].splitlines()
