"""A server's Retry-After cannot stall a run, and a 429 delays only the request it refused.

The parser and the retry policy are tested on their own (virtual time); then the `evalkit` command,
in a child process, against the simulator in this process, for each provider. Under
EVALKIT_UNDER_TEST=<a 0.1.0 checkout> every command-line test fails: the huge Retry-After hangs the
run past the test's timeout, and 429s without one freeze the whole client a second at a time.
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx2
import pytest
from cli_under_test import run_cli
from conftest import make_mcq_jsonl
from fake_clock import FakeClock
from multidict import CIMultiDict, CIMultiDictProxy

from evalkit.ask import retry
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy, rate_limit_wait_s, with_retries
from evalkit.core.errors import MAX_HEADER_WAIT_S, ProviderError, parse_retry_after, retry_after_from_headers
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


@functools.cache
def cap_flag() -> tuple[str, ...]:
    """--max-retry-after 1, where the command has it. 0.1.0 has no such flag and would stop at once
    with a usage error; without it, the run shows what the flag is for: it never ends."""
    helped = run_cli(["run", "mcq", "--help"], timeout=60)
    return ("--max-retry-after", "1") if "--max-retry-after" in helped.stdout else ()


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


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> tuple[Path, object]:
    data = make_mcq_jsonl(tmp_path_factory.mktemp("bounded-small"), 40, seed=12)
    return data, answer_key_for("mcq", {"data": str(data)})


@pytest.fixture(scope="module")
def large_set(tmp_path_factory) -> tuple[Path, object]:
    data = make_mcq_jsonl(tmp_path_factory.mktemp("bounded-large"), 400, seed=13)
    return data, answer_key_for("mcq", {"data": str(data)})


HUGE = [(p, {"retry_after": 999999.0}) for p in sorted(KEYS)] + [
    # retry-after-ms: inf, as a misbehaving proxy sends it (each provider's header reading is unit-tested
    # above and in test_providers; Gemini's wire carries no such header)
    ("vllm", {"retry_after": None, "retry_after_ms": "inf"})]


@pytest.mark.parametrize("provider, advertised", HUGE, ids=[f"{p}-{a.get('retry_after_ms') or 'huge'}"
                                                             for p, a in HUGE])
def test_a_huge_retry_after_is_capped(tmp_path, small_set, provider, advertised):
    """30 % of requests refused with Retry-After 999999 s (or retry-after-ms inf): with
    --max-retry-after 1 each refused request waits at most a second, so 40 queries take seconds."""
    data, key = small_set
    faults = SimFaults(rate=0.3, kinds=("429",), seed=4, **advertised)
    with SimThread(SimConfig(answer_key=key, faults=faults)) as sim:
        done, elapsed = run_against(sim, provider, data, tmp_path, *cap_flag(), timeout=45)
        counters = sim.counters.snapshot()
    assert_all_answered(done, tmp_path / "run", 40)
    assert counters["rate_limited"] >= 5 and counters["completions"] == 40
    assert counters["requests"] == 40 + counters["rate_limited"]  # each refusal retried, once
    assert elapsed < 30, f"{elapsed:.1f}s"


@pytest.mark.parametrize("provider", ["vllm", "google"])  # the policy is the runner's; a 429 is one per wire
def test_a_429_without_retry_after_delays_only_its_request(tmp_path, large_set, provider):
    """400 queries at 32 in flight, 100 ms each, 10 % refused with a bare 429. Only the refused
    request backs off, so the server sees about half of the 32 in flight on average (0.1.0 paused
    the whole client a second per 429: about 3) and the run takes seconds (0.1.0: about 20 s)."""
    data, key = large_set
    faults = SimFaults(rate=0.1, kinds=("429",), retry_after=None, seed=5)
    samples: list[int] = []
    with SimThread(SimConfig(answer_key=key, faults=faults, latency_s=0.1)) as sim:
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                samples.append(sim.counters["in_flight"])

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            done, elapsed = run_against(sim, provider, data, tmp_path, "--concurrency", "32", timeout=90)
        finally:
            stop.set()
            sampler.join()
        counters = sim.counters.snapshot()
    assert_all_answered(done, tmp_path / "run", 400)
    assert counters["rate_limited"] >= 20 and counters["completions"] == 400
    busy = [i for i, n in enumerate(samples) if n > 0]
    mean_in_flight = statistics.mean(samples[busy[0]:busy[-1] + 1])
    assert counters["max_in_flight"] >= 24
    # twice 0.1.0's ~3 (alone: 11.4 for vllm, 18.7 for google; 6.9 and 7.7 through the google SDK with the
    # whole suite running beside it on two cores)
    assert mean_in_flight >= 6, f"mean {mean_in_flight:.1f} in flight"
    assert elapsed < 40, f"{elapsed:.1f}s"
