"""Adaptive limits end to end: runs against the simulator's hidden limit through the command line (and
run() for Anthropic), showing only the wiring: limits learned from the headers or from 429s, and
nothing learned with --no-adaptive. No wall-clock bound: the policy's numbers are proven on virtual
time in test_adaptive_limiter.py.
"""

from __future__ import annotations

import json

import pytest
from provider_runs import assert_all_answered, in_process, run_against
from synthetic_data import make_mcq_jsonl

from evalkit.ask.adaptive import MARGIN
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread


@pytest.fixture(scope="module")
def limited_set(tmp_path_factory):
    data = make_mcq_jsonl(tmp_path_factory.mktemp("adaptive"), LIMITED, seed=17)
    return data, answer_key_for("mcq", {"data": str(data)})


LIMITED = 60


def run_limited(tmp_path, limited_set, provider: str, headers: str, *extra: str, child: bool = True) -> dict:
    """60 queries at the default 32 in flight against a hidden 50 requests/s (20 ms each), every one
    answered in the end; the server's counters. The policy's numbers are proven on virtual time
    (test_adaptive_limiter.py): these runs show the command wiring the wire's headers (or 429s) to it, at
    any machine's speed. With `child` False, run() in this process instead of the command (the provider's
    SDK is imported once)."""
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
