"""Adaptive limits: the pure policy on a fake clock, the headers it reads, the limiter applying it, whole
runs against the simulator's hidden limit on virtual time, and the command wiring it all (no wall-clock bound)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from conftest import make_mcq_jsonl
from fake_clock import FakeClock as VirtualTime
from test_bounded_waits import assert_all_answered, in_process, run_against

from evalkit.ask import retry
from evalkit.ask.adaptive import CUT, MARGIN, MEASURE_S, RAISE, AdaptiveRate
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.retry import RetryPolicy, with_retries
from evalkit.core.errors import ProviderError, retry_after_from_headers
from evalkit.core.types import RateInfo
from evalkit.engine.evaluate import run
from evalkit.providers.rate_headers import duration_s, rate_info
from evalkit.sim.faults import SimFaults
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.limits import HiddenLimits
from evalkit.sim.server import SimConfig, SimThread


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


def successes(policy: AdaptiveRate, start: float, per_s: float, seconds: float) -> float:
    """Feed evenly spaced successes; return the time after the last one."""
    n = int(per_s * seconds)
    t = start
    for i in range(n):
        t = start + (i + 1) / per_s
        policy.observe(t, refused=False)
    return t


# ------------------------------------------------------------------ announced limits


def test_announced_limits_are_followed_just_under():
    policy = AdaptiveRate()
    rates = policy.observe(1.0, refused=False, info=RateInfo(requests_per_min=2400, requests_left=100,
                                                              tokens_per_min=600_000, tokens_left=5000))
    assert rates.rpm == pytest.approx(2400 * MARGIN) and rates.tpm == pytest.approx(600_000 * MARGIN)
    assert rates.source == "headers" and rates.pause_s == 0.0


def test_a_window_announced_as_used_up_pauses_until_it_resets():
    policy = AdaptiveRate()
    rates = policy.observe(1.0, refused=True, info=RateInfo(requests_per_min=60, requests_left=0, requests_reset_s=0.75,
                                                             tokens_per_min=10_000, tokens_left=0, tokens_reset_s=2.5))
    assert rates.pause_s == pytest.approx(2.5)
    assert policy.observe(1.1, refused=False, info=RateInfo(requests_per_min=60, requests_left=3)).pause_s == 0.0


def test_user_ceilings_stay_ceilings_under_announced_limits():
    policy = AdaptiveRate(ceiling_rpm=600, ceiling_tpm=None)
    rates = policy.observe(1.0, refused=False, info=RateInfo(requests_per_min=6000, tokens_per_min=90_000))
    assert rates.rpm == 600 and rates.tpm == pytest.approx(90_000 * MARGIN)
    assert policy.observe(2.0, refused=False, info=RateInfo(requests_per_min=300)).rpm == pytest.approx(300 * MARGIN)


def test_once_headers_are_seen_refusals_without_them_do_not_start_aimd():
    policy = AdaptiveRate()
    policy.observe(1.0, refused=False, info=RateInfo(requests_per_min=1200))
    for i in range(20):
        rates = policy.observe(1.0 + i * 0.01, refused=True)
    assert rates.rpm == pytest.approx(1200 * MARGIN) and rates.source == "headers"


# ------------------------------------------------------------------ AIMD, where nothing is announced


def test_nothing_is_limited_until_refusals_come():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=100, seconds=3)
    assert policy.rates().rpm is None and policy.observe(t, refused=False).source == "none"


def test_a_sustained_share_of_refusals_cuts_to_a_share_of_the_measured_rate():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=50, seconds=2)  # 50 answers/s measured over the last second
    rates = None
    for i in range(6):  # 6 refusals among the last second's 56 replies: a few per cent, no cut
        rates = policy.observe(t + 0.001 * (i + 1), refused=True)
    assert rates.rpm is None
    for i in range(14):  # 20 among 70: more than a quarter, the rate is cut
        rates = policy.observe(t + 0.01 + 0.001 * i, refused=True)
    assert rates.source == "aimd"
    assert rates.rpm == pytest.approx(50 * 60 * CUT, rel=0.05)


def test_random_refusals_at_a_steady_few_per_cent_never_cut():
    policy = AdaptiveRate(start=0.0)
    t = 0.0
    for i in range(5000):  # 100 replies/s for 50 s, every 10th refused (10 %)
        t = (i + 1) / 100
        rates = policy.observe(t, refused=i % 10 == 9)
    assert rates.rpm is None and rates.source == "none"


def test_after_a_cut_refusals_caused_by_the_old_rate_do_not_cut_again():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=100, seconds=1)
    for i in range(50):
        rates = policy.observe(t + 0.001 * i, refused=True)
    first = rates.rpm
    assert first == pytest.approx(100 * 60 * CUT, rel=0.05)
    for i in range(50):  # more refusals within half a second of the cut: sent at the old rate
        rates = policy.observe(t + 0.05 + 0.008 * i, refused=True)
    assert rates.rpm == first


def test_after_a_cut_the_rate_climbs_back_fast_then_probes_slowly_and_is_cut_again():
    policy = AdaptiveRate(start=0.0)
    t = successes(policy, 0.0, per_s=100, seconds=1)
    for i in range(50):
        policy.observe(t + 0.001 * i, refused=True)
    found = policy.rates().rpm / CUT  # the success rate measured at the cut
    assert found == pytest.approx(100 * 60, rel=0.05)
    steps = []
    for k in range(1, 9):  # one success every half second: one raise each
        steps.append(policy.observe(t + 0.05 + 0.51 * k, refused=False).rpm)
    cut = found * CUT
    assert steps[0] == pytest.approx(cut * 1.05, rel=0.05)
    assert steps[1] == pytest.approx(cut * 1.05 * 1.10, rel=0.05)
    assert steps[2] == pytest.approx(min(found, cut * 1.05 * 1.10 * 1.20), rel=0.05)
    assert max(steps) <= found * RAISE ** 5 * 1.05 and steps[-1] > found  # above the rate found: 5 % a step
    assert steps[-1] / steps[-2] == pytest.approx(RAISE)
    t = t + 0.05 + 0.51 * 8
    for i in range(4):  # refusals again
        policy.observe(t + 0.001 * i, refused=True)
    probing_cut = policy.observe(t + 0.01, refused=True)  # 5 of the window's few replies: a cut while probing
    assert probing_cut.rpm < steps[-1]


def test_a_storm_of_refusals_before_anything_is_measured_holds_everyone_briefly():
    policy = AdaptiveRate()
    policy.observe(10.0, refused=False)
    holds = [policy.observe(10.01 + 0.001 * i, refused=True).pause_s for i in range(30)]
    assert holds.count(MEASURE_S) == 1 and policy.rates().rpm is None  # one hold, no rate guessed
    later = policy.observe(10.0 + MEASURE_S + 0.05, refused=True)  # a measurement exists now: cut, no hold
    assert later.pause_s == 0 and later.source == "aimd"


def test_refusals_with_nothing_answered_leave_the_rate_alone():
    policy = AdaptiveRate(start=0.0)
    for i in range(30):
        rates = policy.observe(0.01 * i, refused=True)
    assert rates.rpm is None


def test_the_cut_respects_the_ceiling():
    policy = AdaptiveRate(ceiling_rpm=120.0, start=0.0)
    assert policy.rates().rpm == 120.0  # the user's --rpm holds before anything is learned
    policy.observe(0.5, refused=False)
    for i in range(10):
        rates = policy.observe(5.0 + 0.01 * i, refused=True)  # the one success has left the window
    assert rates.rpm == 120.0


# ------------------------------------------------------------------ the headers


def test_openai_headers():
    info = rate_info({"X-RateLimit-Limit-Requests": "500", "x-ratelimit-remaining-requests": "499",
                      "x-ratelimit-reset-requests": "120ms", "x-ratelimit-limit-tokens": "30000",
                      "x-ratelimit-remaining-tokens": "29000", "x-ratelimit-reset-tokens": "6m0s"})
    assert info == RateInfo(500, 499, 0.12, 30000, 29000, 360.0)


@pytest.mark.parametrize("text,seconds", [("1s", 1.0), ("20ms", 0.02), ("6m0s", 360.0), ("1.5s", 1.5),
                                          ("1h2m3s", 3723.0), ("", None), ("soon", None), ("5", None),
                                          ("1s junk", None)])
def test_openai_reset_durations(text, seconds):
    assert duration_s(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_anthropic_headers_reset_at_a_time():
    now = 1_700_000_000.0
    info = rate_info({"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                      "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:22Z",
                      "anthropic-ratelimit-input-tokens-limit": "40000",
                      "anthropic-ratelimit-input-tokens-remaining": "39000",
                      "anthropic-ratelimit-input-tokens-reset": "2023-11-14T22:14:20+00:00"}, now=now)
    assert info.requests_per_min == 50 and info.requests_left == 0
    assert info.requests_reset_s == pytest.approx(2.0) and info.tokens_reset_s == pytest.approx(60.0)
    assert info.tokens_per_min == 40000 and info.tokens_left == 39000


def test_unreadable_or_absent_headers():
    assert rate_info({"content-type": "application/json", "retry-after": "1"}) is None
    info = rate_info({"x-ratelimit-limit-requests": "lots", "x-ratelimit-remaining-requests": "-3",
                      "x-ratelimit-reset-requests": "nan"})
    assert info == RateInfo(None, None, None, None, None, None)
    assert AdaptiveRate().observe(1.0, refused=False, info=info).source == "none"


# ------------------------------------------------------------------ the limiter applies it


async def test_the_limiter_spaces_requests_at_the_announced_rate():
    clock = FakeClock()
    limiter = Limiter(rpm=None, tpm=None, concurrency=64, clock=clock)
    limiter.adapt_rates()
    assert limiter.learned_line() is None
    limiter.observe(refused=False, info=RateInfo(requests_per_min=600))  # 10/s announced → 9.7/s
    start = clock.now()
    for _ in range(50):
        async with limiter.slot(1):
            pass
    rate = 50 / (clock.now() - start)
    assert 9.0 < rate < 11.5
    assert "9.7/s (headers)" in limiter.learned_line()


async def test_the_limiter_pauses_everyone_when_a_window_is_used_up():
    clock = FakeClock()
    limiter = Limiter(rpm=None, tpm=None, concurrency=8, clock=clock)
    limiter.adapt_rates()
    limiter.observe(refused=True, info=RateInfo(requests_per_min=6000, requests_left=0, requests_reset_s=3.0))
    start = clock.now()
    async with limiter.slot(1):
        pass
    assert clock.now() - start == pytest.approx(3.0, abs=0.05)


async def test_a_limiter_that_does_not_adapt_ignores_what_it_is_told():
    clock = FakeClock()
    limiter = Limiter(rpm=None, tpm=None, concurrency=8, clock=clock)
    limiter.observe(refused=True, info=RateInfo(requests_per_min=60, requests_left=0, requests_reset_s=30.0))
    start = clock.now()
    for _ in range(20):
        async with limiter.slot(1):
            pass
    assert clock.now() == start


# ------------------------------------------------------------------ against a hidden limit, on virtual time


@dataclass
class Served:
    """What one simulated run against a hidden limit came to."""

    requests: int = 0
    refused: int = 0
    answered: int = 0
    failed: int = 0
    seconds: float = 0.0  # virtual
    learned: dict | None = None

    @property
    def refused_share(self) -> float:
        return self.refused / self.requests


def against_hidden_limit(monkeypatch, headers: str, *, adaptive: bool, n: int = 250, rps: float = 50,
                         concurrency: int = 32, max_attempts: int = 100, seed: int = 1) -> Served:
    """n queries, `concurrency` at a time, through the runner's Limiter and retry policy (with_retries) against
    the simulator's hidden limit (HiddenLimits: rps requests/s, announced in `headers`' dialect), all on
    virtual time (tests/fake_clock.py): each request travels 0.5-2 ms to the server, which refuses it at once
    or answers 20 ms later, with the headers the server would send. The wire and the providers' reading of
    it are left to the end-to-end tests below; this is the policy, at the speed of arithmetic, the same on
    any machine."""
    monkeypatch.setattr(retry, "random", random.Random(seed))  # the backoff's jitter
    travel = random.Random(seed + 1)
    clock = VirtualTime()
    limits = HiddenLimits(SimFaults(rps=rps, rate_headers=headers), clock=clock.now)
    limiter = Limiter(concurrency=concurrency, clock=clock)
    if adaptive:
        limiter.adapt_rates()
    policy = RetryPolicy(max_attempts=max_attempts)
    served = Served()

    async def call() -> SimpleNamespace:
        served.requests += 1
        await clock.sleep(travel.uniform(0.0005, 0.002))
        wait = limits.admit_request()
        if wait > 0:
            served.refused += 1
            said = {**limits.retry_after(wait), **limits.headers()}
            raise ProviderError("rate_limit", "429", status=429, retry_after=retry_after_from_headers(said),
                                limits=rate_info(said))
        await clock.sleep(0.02)
        return SimpleNamespace(limits=rate_info(limits.headers()))

    async def one() -> None:
        try:
            await with_retries(call, policy, limiter)
            served.answered += 1
        except ProviderError:
            served.failed += 1

    asyncio.run(clock.run([one() for _ in range(n)]))
    served.seconds, served.learned = clock.now(), limiter.learned()
    return served


def test_announced_limits_are_followed_on_virtual_time(monkeypatch):
    """250 queries against 50 requests/s announced in OpenAI's headers: the first wave (32, sent before any
    reply) is mostly refused, then hardly anything; the run takes the 5 s the limit allows."""
    served = against_hidden_limit(monkeypatch, "openai", adaptive=True)
    assert served.answered == 250 and served.refused <= 32 + 0.05 * served.requests, served
    assert served.learned == {"source": "headers", "rpm": pytest.approx(50 * 60 * MARGIN, abs=0.1)}
    assert 250 / 50 * 0.95 <= served.seconds <= 250 / 50 * 1.1, served


def test_without_adaptation_the_same_run_is_mostly_refused_on_virtual_time(monkeypatch):
    served = against_hidden_limit(monkeypatch, "openai", adaptive=False, max_attempts=8)  # the default
    assert served.refused > 2 * served.answered and served.learned is None, served


def test_without_headers_aimd_finds_the_rate_on_virtual_time(monkeypatch):
    """No rate headers, not even Retry-After (vLLM behind a proxy): AIMD from the 429s alone refuses a
    fraction of what the same run refuses without it, and takes about the time the limit allows."""
    adaptive = against_hidden_limit(monkeypatch, "none", adaptive=True)
    plain = against_hidden_limit(monkeypatch, "none", adaptive=False)
    assert adaptive.answered == plain.answered == 250
    assert adaptive.refused < 0.35 * plain.refused, (adaptive, plain)
    assert adaptive.refused_share < 1 / 3, adaptive
    assert adaptive.learned["source"] == "aimd" and 0.5 * 50 * 60 < adaptive.learned["rpm"] < 1.5 * 50 * 60
    assert adaptive.seconds <= 250 / 50 * 1.2 < plain.seconds, (adaptive, plain)


# ------------------------------------------------------------------ end to end, through the command line


@pytest.fixture(scope="module")
def limited_set(tmp_path_factory):
    data = make_mcq_jsonl(tmp_path_factory.mktemp("adaptive"), LIMITED, seed=17)
    return data, answer_key_for("mcq", {"data": str(data)})


LIMITED = 60


def run_limited(tmp_path, limited_set, provider: str, headers: str, *extra: str, child: bool = True) -> dict:
    """60 queries at the default 32 in flight against a hidden 50 requests/s (20 ms each), every one
    answered in the end; the server's counters. The policy's numbers are proven on virtual time above:
    these runs show the command wiring the wire's headers (or 429s) to it, at any machine's speed. With
    `child` False, run() in this process instead of the command (the provider's SDK is imported once)."""
    data, key = limited_set
    faults = SimFaults(rps=50, rate_headers=headers)
    with SimThread(SimConfig(answer_key=key, faults=faults, latency_s=0.02)) as sim:
        if child:
            done, _ = run_against(sim, provider, data, tmp_path, "--max-attempts", "100", *extra, timeout=120)
            assert_all_answered(done, tmp_path / "run", LIMITED)
        else:
            kwargs, env = in_process(provider, sim.url)
            res = run("mcq", f"{provider}/sim-model", data=str(data), out=str(tmp_path / "run"), env=env,
                      no_cache=True, plots=False, progress=False, max_attempts=100, **kwargs)
            assert res.summary["metrics"]["accuracy"] == 100.0 and res.summary["n_queries"] == LIMITED
        counters = sim.counters.snapshot()
    return counters


def speed_of(tmp_path) -> tuple[dict, str]:
    """The run's summary "throughput" block and its report."""
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return summary["throughput"], (tmp_path / "run" / "report.md").read_text()


# OpenAI's headers through the command; Anthropic's through run() in this process, sparing a child the
# seconds it takes to import the anthropic SDK
@pytest.mark.parametrize("provider, child", [("openai", True), ("anthropic", False)], ids=["openai-command", "anthropic-run"])
def test_announced_limits_are_learned_and_hardly_refused(tmp_path, limited_set, provider, child):
    counters = run_limited(tmp_path, limited_set, provider, provider, child=child)
    first_wave = 32  # sent before any reply could announce a limit: most of it is refused
    assert counters["rate_limited"] <= first_wave + 0.05 * counters["requests"], counters
    speed, report = speed_of(tmp_path)
    assert speed["limits"]["source"] == "headers" and speed["limits"]["rpm"] == pytest.approx(50 * 60 * MARGIN, abs=0.1)
    assert speed["rate_limited"] == counters["rate_limited"] and speed["requests"] == counters["requests"]
    assert f"limits learned from headers: {50 * 60 * MARGIN:,.0f} rpm" in report


def test_without_adaptation_nothing_is_learned(tmp_path, limited_set):
    counters = run_limited(tmp_path, limited_set, "openai", "openai", "--no-adaptive")
    speed, report = speed_of(tmp_path)
    assert "limits" not in speed and "limits learned" not in report
    assert counters["rate_limited"] > 32 + 0.05 * counters["requests"], counters  # what adaptation avoids


def test_without_headers_aimd_learns_from_429s(tmp_path, limited_set):
    """No rate headers, not even Retry-After (vLLM behind a proxy): the command learns from the 429s alone."""
    counters = run_limited(tmp_path, limited_set, "vllm", "none")
    speed, report = speed_of(tmp_path)
    assert counters["rate_limited"] > 0 and speed["rate_limited"] == counters["rate_limited"]
    assert speed["limits"]["source"] == "aimd" and speed["limits"]["rpm"] > 0
    assert "limits learned from 429s: " in report


def test_the_simulator_announces_its_hidden_limits_in_each_dialect():
    t = [1000.0]
    faults = SimFaults(rps=50, tpm=60_000, rate_headers="openai")
    limits = HiddenLimits(faults, clock=lambda: t[0])
    assert limits.admit_request() == 0.0 and limits.admit_tokens(40) == 0.0
    h = limits.headers()
    assert h["x-ratelimit-limit-requests"] == "3000" and h["x-ratelimit-limit-tokens"] == "60000"
    assert h["x-ratelimit-remaining-requests"] == "4" and h["x-ratelimit-remaining-tokens"] == "60"
    assert rate_info(h) == RateInfo(3000, 4, pytest.approx(0.001, abs=0.001), 60000, 60, pytest.approx(0.001, abs=0.001))
    limits.charge(500)  # 500 output tokens into debt: the next request waits (500 - 60 + 40) / 1000 tokens/s
    assert limits.admit_tokens(40) == pytest.approx(0.48, abs=0.01)
    anthropic = HiddenLimits(SimFaults(rps=50, rate_headers="anthropic"), clock=lambda: t[0]).headers()
    assert anthropic["anthropic-ratelimit-requests-limit"] == "3000" and "x-ratelimit-limit-requests" not in anthropic
    assert HiddenLimits(SimFaults(rps=50, rate_headers="none"), clock=lambda: t[0]).headers() == {}
    assert HiddenLimits(SimFaults(rps=50, rate_headers="none")).retry_after(1.0) == {}
