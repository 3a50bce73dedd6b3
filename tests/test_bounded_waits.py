"""A server's Retry-After cannot stall a run, and a 429 delays only the request it refused.

The parser and the retry policy are tested on their own (virtual time); then whole runs against the
simulator in this process, for each provider: the `evalkit` command in a child process, and run() in
this process with the runner's clock in the test's hands (each retry's wait recorded, or held until the
test lets it go), so that an order of events is proven by waiting for the events, not by timing. Under
EVALKIT_UNDER_TEST=<a 0.1.0 checkout> every command-line test fails: the huge Retry-After hangs the
run past the test's timeout, and a 429 pauses the whole client, so the other queries are not answered
while the refused one waits.
"""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx2
import pytest
from cli_under_test import run_cli, start_cli
from conftest import make_mcq_jsonl
from fake_clock import FakeClock
from multidict import CIMultiDict, CIMultiDictProxy

from evalkit.ask import retry
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy, rate_limit_wait_s, with_retries
from evalkit.core.errors import MAX_HEADER_WAIT_S, ProviderError, parse_retry_after, retry_after_from_headers
from evalkit.engine.evaluate import run
from evalkit.sim.faults import SimFaults
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

# ---- the header parser ------------------------------------------------------------------------------

NOW = datetime(2015, 10, 21, 7, 27, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("value, seconds", [
    ("120", 120.0), (" 7 ", 7.0), ("0", 0.0), ("1.5", 1.5), (".25", 0.25), ("3.", 3.0),
    ("999999", MAX_HEADER_WAIT_S), ("9" * 400, MAX_HEADER_WAIT_S),  # valid but absurd: clamped, never inf
    ("inf", None), ("Infinity", None), ("-inf", None), ("nan", None), ("NaN", None),
    ("-1", None), ("-0.5", None), ("1e3", None), ("0x10", None), ("+5", None), ("\u0661\u0662", None),
    ("soon", None), ("", None), ("   ", None), (None, None),
    # HTTP-dates (RFC 9110: IMF-fixdate, RFC 850, asctime), measured from NOW = 07:27:00 that day
    ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),
    ("Wednesday, 21-Oct-15 07:28:00 GMT", 60.0),
    ("Wed Oct 21 07:28:00 2015", 60.0),
    ("Wed, 21 Oct 2015 07:26:00 GMT", 0.0),  # already past: retry now
    ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_HEADER_WAIT_S),
    ("Wed, 21 Oct 2015 25:28:00 GMT", None),  # hour 25
    ("Wed, 21 Oct 99999 07:28:00 GMT", None),
    ("Wed, 32 Foo 2015 07:28:00 GMT", None),
])
def test_parse_retry_after(value, seconds):
    got = parse_retry_after(value, now=NOW)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def test_the_clamp_is_a_day():
    assert MAX_HEADER_WAIT_S == 86400.0


@pytest.mark.parametrize("make", [dict, lambda d: CIMultiDictProxy(CIMultiDict(d)), httpx2.Headers],
                         ids=["dict", "aiohttp", "httpx"])
def test_retry_after_from_headers_any_mapping_any_case(make):
    assert retry_after_from_headers(make({"Retry-After-Ms": "250", "RETRY-AFTER": "1"})) == 0.25
    assert retry_after_from_headers(make({"retry-after": "3"})) == 3.0
    assert retry_after_from_headers(make({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}), now=NOW) == 90.0
    assert retry_after_from_headers(make({"retry-after-ms": "inf", "Retry-After": "2"})) == 2.0  # falls through
    assert retry_after_from_headers(make({"retry-after-ms": "nan"})) is None
    assert retry_after_from_headers(make({"retry-after-ms": "-5", "retry-after": "inf"})) is None
    assert retry_after_from_headers(make({"retry-after-ms": "1" + "0" * 30})) == MAX_HEADER_WAIT_S
    assert retry_after_from_headers(make({"Content-Type": "application/json"})) is None
    assert retry_after_from_headers(make({})) is None


def test_retry_after_from_no_headers():
    assert retry_after_from_headers(None) is None


# ---- the policy, on virtual time --------------------------------------------------------------------


@pytest.fixture
def ceiling_backoff(monkeypatch):
    """backoff_s returns its ceiling instead of a uniform draw below it, so waits are exact numbers."""
    monkeypatch.setattr(retry.random, "uniform", lambda low, high: high)


def refusing(clock: FakeClock, retry_after: float | None, refusals: int, log: list[float], work_s: float = 1.0):
    """A call that takes work_s, answers 429 (with retry_after) `refusals` times, then "ok"."""
    async def call() -> str:
        log.append(clock.now())
        await clock.sleep(work_s)
        if len(log) <= refusals:
            raise ProviderError("rate_limit", "429", retry_after=retry_after, status=429)
        return "ok"
    return call


@pytest.mark.parametrize("retry_after, wait", [
    (999999.0, 1.5),  # capped
    (float("inf"), 1.5),  # what a provider's own header parsing may hand over
    (0.25, 0.25),  # honoured below the cap
    (0.0, 0.0),
    (-3.0, 0.0),
    (None, None),  # no Retry-After: the backoff
    (float("nan"), None),
])
async def test_a_429_waits_its_retry_after_up_to_the_cap(retry_after, wait, ceiling_backoff):
    clock = FakeClock()
    lim = Limiter(concurrency=4, clock=clock)
    policy = RetryPolicy(max_attempts=5, initial_s=0.1, max_retry_after_s=1.5)
    starts: list[float] = []
    [out] = await clock.run([with_retries(refusing(clock, retry_after, 3, starts), policy, lim)])
    waits = [b - a - 1.0 for a, b in zip(starts, starts[1:], strict=False)]
    expected = [wait] * 3 if wait is not None else [0.1, 0.2, 0.4]  # the backoff doubles
    assert out == "ok" and waits == pytest.approx(expected)
    assert lim.paused_until == float("-inf") and lim.stats.paused_s == 0.0  # nobody else was stopped


async def test_each_429_is_an_attempt_and_the_last_is_not_waited_for():
    clock = FakeClock()
    lim = Limiter(clock=clock)
    starts: list[float] = []
    attempts: list[int] = []
    policy = RetryPolicy(max_attempts=3, max_retry_after_s=2.0)
    with pytest.raises(ProviderError) as err:
        await clock.run([with_retries(refusing(clock, 999999.0, 99, starts), policy, lim,
                                      on_attempt=attempts.append)])
    assert err.value.kind == "rate_limit" and attempts == [1, 2, 3]
    assert starts == pytest.approx([0.0, 3.0, 6.0]) and clock.now() == pytest.approx(7.0)


def test_the_default_cap_is_a_minute():
    assert RetryPolicy().max_retry_after_s == 60.0
    assert rate_limit_wait_s(RetryPolicy(), 1e9, 1) == 60.0
    assert rate_limit_wait_s(RetryPolicy(max_retry_after_s=float("nan")), 5.0, 1) == 0.0


async def test_a_429_does_not_stop_the_other_requests():
    """20 one-second requests, 4 at a time; the first is refused at t=1 with Retry-After 5. The other
    19 go on in waves (t = 0, 1, 2, 3, 4) and are done at t=5; the refused one alone starts again at
    t=6. Pausing the whole client would have started nobody between t=1 and t=6."""
    clock = FakeClock()
    lim = Limiter(concurrency=4, clock=clock)
    policy = RetryPolicy(max_retry_after_s=60.0)
    first: list[float] = []
    others: list[list[float]] = [[] for _ in range(19)]
    done: list[float] = []

    async def one(call) -> None:
        await with_retries(call, policy, lim)
        done.append(clock.now())

    tasks = [one(refusing(clock, 5.0, 1, first))] + [one(refusing(clock, None, 0, log)) for log in others]
    await clock.run(tasks)
    starts = sorted(log[0] for log in others)
    assert starts == pytest.approx([0.0] * 3 + [1.0] * 4 + [2.0] * 4 + [3.0] * 4 + [4.0] * 4)
    assert first == pytest.approx([0.0, 6.0])
    assert sorted(done) == pytest.approx([1.0] * 3 + [2.0] * 4 + [3.0] * 4 + [4.0] * 4 + [5.0] * 4 + [7.0])
    assert lim.stats.max_in_flight == 4 and lim.stats.paused_s == 0.0 and lim.stats.requests == 21


# ---- the command line, each provider against the simulator -----------------------------------------

KEYS = {"vllm": {}, "openai": {"OPENAI_API_KEY": "sk-test-bounded"},
        "anthropic": {"ANTHROPIC_API_KEY": "sk-ant-test-bounded"}, "google": {"GEMINI_API_KEY": "gm-test-bounded"}}


def pointed_at(provider: str, url: str) -> tuple[list[str], dict[str, str]]:
    """(flags, environment) that send `provider` to the simulator at url, with a fake key."""
    env = dict(KEYS[provider])
    if provider == "anthropic":
        return [], {**env, "ANTHROPIC_BASE_URL": url}
    if provider == "google":
        return [], {**env, "GEMINI_BASE_URL": url}
    return ["--base-url", url + "/v1" if provider == "openai" else url], env


CAP_S = 0.2  # --max-retry-after in the tests below: each refused request waits this long at most


@functools.cache
def cap_flag() -> tuple[str, ...]:
    """--max-retry-after CAP_S, where the command has it. 0.1.0 has no such flag and would stop at once
    with a usage error; without it, the run shows what the flag is for: it never ends."""
    helped = run_cli(["run", "mcq", "--help"], timeout=60)
    return ("--max-retry-after", str(CAP_S)) if "--max-retry-after" in helped.stdout else ()


def run_against(sim: SimThread, provider: str, data: Path, out: Path, *extra: str,
                timeout: float) -> tuple[subprocess.CompletedProcess[str] | None, float]:
    """`evalkit run mcq` through `provider` at the simulator; (the process, or None on timeout, seconds)."""
    flags, env = pointed_at(provider, sim.url)
    args = ["run", "mcq", "--model", f"{provider}/sim-model", "--data", str(data), "--out", str(out / "run"),
            "--no-cache", "--no-progress", *flags, *extra]
    started = time.monotonic()
    try:
        done = run_cli(args, env=env, timeout=timeout, cwd=out)
    except subprocess.TimeoutExpired:
        done = None
    return done, time.monotonic() - started


def assert_all_answered(done: subprocess.CompletedProcess[str] | None, run_dir: Path, n: int) -> None:
    assert done is not None, "the run did not finish within the test's timeout"
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == n and len({r["query_id"] for r in records}) == n
    assert [r for r in records if r["error"] is not None] == []
    assert all(r["correct"] for r in records)


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
    # above and in test_providers; Gemini's wire carries no such header)
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


def in_process(provider: str, url: str) -> tuple[dict[str, object], dict[str, str]]:
    """(run() keywords, environment) that send `provider` to the simulator at url, like pointed_at()."""
    flags, env = pointed_at(provider, url)
    return ({"base_url": flags[1]} if flags else {}), env


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
    that every sleep on the clock is a retry's wait (they may hold everyone briefly: test_adaptive)."""
    monkeypatch.setattr("evalkit.engine.wiring.Limiter", functools.partial(Limiter, clock=clock))
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
