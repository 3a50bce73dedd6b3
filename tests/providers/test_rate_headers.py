"""Rate-limit headers: OpenAI's and Anthropic's as the providers read them (rate_info, reset durations and
times), and the simulator announcing its hidden limits in each dialect. The adaptive policy reads them
(test_adaptive_policy.py)."""

from __future__ import annotations

import pytest

from evalkit.ask.adaptive import AdaptiveRate
from evalkit.core.types import RateInfo
from evalkit.providers.wire.rate_headers import duration_s, rate_info
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.machinery.limits import HiddenLimits


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
