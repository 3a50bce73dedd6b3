"""The circuit breaker's decision on a fake clock, and the preflight's reading of metadata replies."""

from __future__ import annotations

from evalkit.ask.breaker import BURST, QUIET_S, Breaker, signature
from evalkit.core.errors import ProviderError
from evalkit.providers.base import ProviderSpec
from evalkit.providers.preflight import judge_reply


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def refused(port: int = 1) -> ProviderError:
    return ProviderError("transient", f"connection refused (http://10.0.0.{port}:8000/v1)")


def test_it_trips_only_after_a_burst_and_the_quiet_time():
    clock = Clock()
    b = Breaker(clock=clock)
    for _ in range(BURST * 3):
        b.failure(refused())
    assert b.tripped is None  # many failures, but within the quiet time
    clock.t += QUIET_S
    b.check()
    assert b.tripped and "connection refused (http://10.0.0.1:8000/v1)" in b.tripped
    assert f"for {QUIET_S:.0f} s" in b.tripped


def test_one_success_resets_it_so_intermittent_faults_never_trip():
    clock = Clock()
    b = Breaker(clock=clock)
    for _ in range(200):
        for _ in range(3):
            clock.t += 1.0
            b.failure(refused())
        b.success()
    assert b.tripped is None


def test_replicas_failing_alike_are_one_streak_but_another_cause_starts_a_new_one():
    assert signature(refused(1)) == signature(refused(2))
    clock = Clock()
    b = Breaker(clock=clock)
    clock.t += QUIET_S + 1
    for i in range(BURST - 1):
        b.failure(refused(i))
    b.failure(ProviderError("permanent", "HTTP 400: bad image", status=400))  # a different cause
    assert b.tripped is None
    for _ in range(BURST):
        b.failure(ProviderError("permanent", "HTTP 400: bad image", status=400))
    assert b.tripped and "HTTP 400: bad image" in b.tripped


def test_rate_limits_refusals_and_empty_answers_are_a_live_server():
    clock = Clock()
    b = Breaker(clock=clock)
    for kind in ("rate_limit", "refused", "empty"):
        for _ in range(BURST):
            b.failure(refused())
        clock.t += QUIET_S + 1
        b.failure(ProviderError(kind, "x"))
        b.check()
        assert b.tripped is None


SPEC = {p: ProviderSpec(p, "m") for p in ("vllm", "openai", "anthropic", "google")}


def test_the_preflight_reads_model_lists_and_lookups():
    listing = {"data": [{"id": "a", "owned_by": "vllm"}, {"id": "b", "owned_by": "vllm"}]}  # vLLM's own list
    assert judge_reply(SPEC["vllm"], 200, listing)[0] == "model 'm' is not served there (it serves: a, b)"
    assert judge_reply(SPEC["vllm"], 200, {"data": [{"id": "a"}]}) == (None, False)  # maybe lenient: asked anyway
    assert judge_reply(SPEC["vllm"], 200, {"data": [{"id": "m"}]}) == (None, False)
    sim = {"data": [{"id": "x", "owned_by": "evalkit-sim"}], "evalkit_sim": {"strict_model": False}}
    assert judge_reply(SPEC["vllm"], 200, sim) == (None, True)  # a simulator that serves any name
    assert judge_reply(SPEC["openai"], 401, None)[0] == "HTTP 401: the API key was refused"
    assert judge_reply(SPEC["vllm"], 404, None) == (None, False)  # a server without a model list
    assert judge_reply(SPEC["vllm"], 503, None) == (None, False)  # left to the runner's retries
    not_found = {"type": "error", "error": {"type": "not_found_error", "message": "model: m"}}
    assert judge_reply(SPEC["anthropic"], 404, not_found)[0] == "HTTP 404: unknown model 'm'"
    assert judge_reply(SPEC["anthropic"], 404, None) == (None, False)  # a proxy without the lookup
    bad_key = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key."}}
    assert judge_reply(SPEC["google"], 400, bad_key)[0] == "HTTP 400: API key not valid. Please pass a valid API key."
    assert judge_reply(SPEC["google"], 200, {"name": "models/m"}) == (None, False)
