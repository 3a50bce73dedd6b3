"""The preflight's metadata call for each provider, against the simulator and a closed port."""

from __future__ import annotations

import socket

import pytest
from sim_providers import plain_providers

from evalkit.core.errors import EvalkitError
from evalkit.providers.base import ProviderSpec
from evalkit.providers.preflight import probe_all
from evalkit.sim.server import SimConfig, start_sim

PROVIDERS = plain_providers()  # the registry's, on the simulator's plain routes (tests/sim_providers.py)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_provider_reaches_the_simulator_and_knows_it(provider):
    async with await start_sim(SimConfig(strict_model=True, served_model_name="m", owned_by="vllm")) as sim:
        reached = await probe_all(ProviderSpec(provider, "m", (sim.url,)), "k")
        assert reached.simulator_urls == (sim.url,) and reached.notes() == []
        with pytest.raises(EvalkitError, match="unknown model 'other'|model 'other' is not served there"):
            await probe_all(ProviderSpec(provider, "other", (sim.url,)), "k")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refused_key_and_a_dead_endpoint_are_named(provider):
    async with await start_sim(SimConfig(api_key="right")) as sim:
        with pytest.raises(EvalkitError, match=r"cannot be reached: http://127\.0\.0\.1:\d+: HTTP 401"):
            await probe_all(ProviderSpec(provider, "m", (sim.url,)), "wrong")
    dead = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(EvalkitError, match=f"--judge {provider}/m cannot be reached: {dead}: connection refused"):
        await probe_all(ProviderSpec(provider, "m", (dead,)), "k", "--judge")


async def test_with_replicas_the_dead_one_is_named_and_the_run_goes_on():
    dead = f"http://127.0.0.1:{_closed_port()}"
    async with await start_sim(SimConfig()) as sim:
        reached = await probe_all(ProviderSpec("vllm", "sim-model", (sim.url, dead)), None)
    assert [p.ok for p in reached.probes] == [True, False]
    assert reached.notes() == [f"vllm/sim-model: replica {dead} does not answer (connection refused); "
                               "the run goes on without it"]


def test_a_cached_rerun_needs_no_server(tmp_path):
    """The preflight waits for the first request that must be sent: with every answer cached, a run
    into a new directory works with the server gone (and sends nothing)."""
    from synthetic_data import make_mcq_jsonl

    from evalkit import run
    from evalkit.sim.from_bench import answer_key_for
    from evalkit.sim.server import SimThread

    data = make_mcq_jsonl(tmp_path / "ds", 8, seed=2)
    opts = {"data": str(data), "cache_dir": str(tmp_path / "cache"), "progress": False, "plots": False,
            "cache_tag": "the-sim"}
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        first = run("mcq", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "a"), **opts)
    assert first.exit_code == 0
    dead = f"http://127.0.0.1:{_closed_port()}"
    again = run("mcq", "vllm/sim-model", base_url=dead, out=str(tmp_path / "b"), **opts)
    assert again.exit_code == 0 and again.summary["cache"]["hits"] == 8
    assert again.summary["metrics"] == first.summary["metrics"]
