"""The simulated server under faults: each injected kind, fault rates, the rps limit, counters."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import pytest
from sim_helpers import (
    body,
    post,
)

from evalkit.sim import (
    ServerTokenBucket,
    SimConfig,
    SimFaults,
    server_request_key,
    start_sim,
)

# -- faults, limits, counters ----------------------------------------------------------------


async def test_each_fault_kind():
    payload = body("Q?\nA. x\nB. y")
    async with aiohttp.ClientSession() as s:
        for kind in ("429", "500", "503", "hang", "drop", "malformed", "empty"):
            faults = SimFaults(rate=1.0, kinds=(kind,), retry_after=2.5, hang_s=0.2)
            server = await start_sim(SimConfig(faults=faults))
            try:
                if kind == "drop":
                    with pytest.raises(aiohttp.ClientError):
                        await post(s, server.url, payload)
                else:
                    started = time.monotonic()
                    status, headers, data = await post(s, server.url, payload)
                    if kind == "429":
                        assert status == 429 and headers["Retry-After"] == "3" and headers["retry-after-ms"] == "2500"
                    elif kind in ("500", "503"):
                        assert status == int(kind) and "message" in data["error"]
                    elif kind == "hang":
                        assert status == 504 and time.monotonic() - started >= 0.19
                    elif kind == "malformed":
                        assert status == 200 and "_raw" in data
                    else:
                        assert status == 200 and data["choices"][0]["message"]["content"] == ""
                snap = server.counters.snapshot()
                assert snap["faults"] == {kind: 1} and snap["completions"] == 0 and snap["requests"] == 1
                assert snap["rate_limited"] == (kind == "429")
                assert snap["errors_5xx"] == (kind in ("500", "503", "hang"))
            finally:
                await server.close()


async def test_fault_rate_and_openai_sdk_errors():
    server = await start_sim(SimConfig(faults=SimFaults(rate=0.5, kinds=("429", "500"), retry_after=0.01)))
    try:
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        outcomes = {"ok": 0, "429": 0, "500": 0}
        for i in range(60):
            try:
                await client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                outcomes["ok"] += 1
            except openai.RateLimitError:
                outcomes["429"] += 1
            except openai.InternalServerError:
                outcomes["500"] += 1
        assert all(n > 5 for n in outcomes.values()), outcomes
        assert server.counters["completions"] == outcomes["ok"]
        await client.close()
    finally:
        await server.close()


async def test_rps_limit_returns_429_with_retry_after_ms():
    server = await start_sim(SimConfig(faults=SimFaults(rps=20)))
    try:
        async with aiohttp.ClientSession() as s:
            results = await asyncio.gather(*(post(s, server.url, body(f"q{i}")) for i in range(10)))
            limited = [h for status, h, _ in results if status == 429]
            assert len(limited) >= 5  # burst is max(1, 20/10) = 2
            assert all(0 < int(h["retry-after-ms"]) <= 100 and h["Retry-After"] == "1" for h in limited)
            await asyncio.sleep(0.15)
            status, _, _ = await post(s, server.url, body("later"))
            assert status == 200
        assert server.counters["rate_limited"] == len(limited)
    finally:
        await server.close()


def test_token_bucket_refills():
    now = [0.0]
    bucket = ServerTokenBucket(10, clock=lambda: now[0])
    assert bucket.burst == 1 and bucket.take() == 0.0
    assert bucket.take() == pytest.approx(0.1)
    now[0] = 0.1
    assert bucket.take() == 0.0


async def test_counters_per_key_and_in_flight():
    server = await start_sim(SimConfig(latency_s=0.05))
    payloads = [body(f"Question {i}?\nA. x\nB. y") for i in range(8)]
    try:
        async with aiohttp.ClientSession() as s:
            await asyncio.gather(*(post(s, server.url, p) for p in payloads))
            await post(s, server.url, payloads[0])
        snap = server.counters.snapshot()
        assert snap["per_key"][server_request_key(payloads[0])] == 2
        assert all(snap["per_key"][server_request_key(p)] == 1 for p in payloads[1:])
        assert snap["requests"] == snap["completions"] == 9
        assert snap["in_flight"] == 0 and snap["max_in_flight"] >= 4
    finally:
        await server.close()


@pytest.mark.parametrize("advertised, headers", [
    ({}, {"Retry-After": "1", "retry-after-ms": "1000"}),  # the default
    ({"retry_after": 999999}, {"Retry-After": "999999", "retry-after-ms": "999999000"}),
    ({"retry_after": 0.05}, {"Retry-After": "1", "retry-after-ms": "50"}),
    ({"retry_after": None}, {}),  # a bare 429
    ({"retry_after": None, "retry_after_ms": "inf"}, {"retry-after-ms": "inf"}),
    ({"retry_after": 2, "retry_after_ms": "nan"}, {"Retry-After": "2", "retry-after-ms": "nan"}),
    ({"retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"}, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
])
async def test_a_429_advertises_what_the_faults_say(advertised, headers):
    server = await start_sim(SimConfig(faults=SimFaults(rate=1.0, kinds=("429",), **advertised)))
    try:
        async with aiohttp.ClientSession() as s:
            status, got, _ = await post(s, server.url, body("Q?"))
        assert status == 429
        assert {k: v for k, v in got.items() if k.lower() in ("retry-after", "retry-after-ms")} == headers
    finally:
        await server.close()


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0])
def test_a_numeric_retry_after_must_be_finite_seconds(bad):
    with pytest.raises(ValueError, match="retry_after"):
        SimFaults(retry_after=bad)
