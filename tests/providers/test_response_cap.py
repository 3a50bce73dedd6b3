"""Replies past the size cap (32 MB decompressed by default) are refused while being read.

evalkit 0.1.0 read whole bodies: a gzip body inflating to 400 MB took the process past 1.3 GB
for two queries, and a 40 MB body was read, parsed and recorded as an answer. Each test runs the
CLI in a child process (tests/cli_under_test.py) under a small Python parent whose only child
it is, so the parent's RUSAGE_CHILDREN peak is exactly the CLI's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hostile_routes import HostileRoutes
from synthetic_data import TESTS, make_mcq_jsonl
from test_hostile_replies import PROVIDERS, pointed_at, sim_for

from evalkit.core.errors import ProviderError
from evalkit.core.types import GenParams, Message
from evalkit.providers import parse_spec
from evalkit.providers.anthropic.client import AnthropicProvider
from evalkit.providers.google.client import GoogleProvider
from evalkit.providers.openai.api import openai_provider
from evalkit.providers.openai.compat import OpenAICompatProvider
from evalkit.sim.server import SimConfig, start_sim

PEAK_LIMIT_MB = 250  # a run here peaks at 70-180 MB; 0.1.0 at 300 MB (40 MB body) to 1.5 GB (the bomb)
_MEASURED = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from cli_under_test import run_cli
proc = run_cli(json.loads(sys.argv[2]), env=json.loads(sys.argv[3]), timeout=300)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(json.dumps({"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "peak_mb": peak / 1024}))
"""


def run_measured(args: list[str], env: dict[str, str]) -> dict:
    """`evalkit ARGS` as the only child of a fresh interpreter: exit code, output and peak RSS (MB)."""
    # started cold (no warm zygote): the CLI is then the measuring interpreter's only child, and one
    # interpreter start is all the test pays for
    out = subprocess.run([sys.executable, "-c", _MEASURED, str(TESTS), json.dumps(args), json.dumps(env)],
                         capture_output=True, text=True, timeout=360, env={**os.environ, "EVALKIT_TESTS_COLD": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(("behaviour", "provider"), [("gzip-bomb", p) for p in PROVIDERS] + [
    ("huge", "vllm"), ("huge-chunked", "anthropic"), ("huge", "google")])
def test_an_oversized_reply_is_refused_within_bounded_memory(tmp_path, provider, behaviour):
    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=9)
    with sim_for(data) as sim:
        extra, env = pointed_at(provider, f"{sim.url}/hostile/{behaviour}")
        result = run_measured(["run", "mcq", "--model", f"{provider}/sim-model", "--data", str(data),
                               "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
                               "--no-progress", *extra], env)
        requests = sim.counters.snapshot()["requests"]
    assert "Traceback" not in result["stderr"], result["stderr"][-3000:]
    assert result["peak_mb"] < PEAK_LIMIT_MB, result["peak_mb"]
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert [(r["error"], r["error_message"]) for r in records] == \
        [("permanent", "reply larger than 32 MB (--max-response-mb)")] * 2
    assert result["rc"] == 1 and requests == 2  # permanent: not retried


# ---- the cap is a constructor keyword of every provider ---------------------------------------

def _providers(url: str, cap: int) -> dict[str, object]:
    key = {"api_key": "sk-cap-test"}
    return {
        "vllm": OpenAICompatProvider(parse_spec("vllm/sim-model", [url + "/v1"]), max_response_bytes=cap),
        "openai": openai_provider(parse_spec("openai/sim-model", [url + "/v1"]), env={}, max_response_bytes=cap,
                                  **key),
        "anthropic": AnthropicProvider(parse_spec("anthropic/sim-model", [url]), max_response_bytes=cap, **key),
        "google": GoogleProvider(parse_spec("google/sim-model", [url]), max_response_bytes=cap, **key),
    }


async def test_max_response_bytes_sets_each_providers_cap():
    """A 1 MB cap refuses the 40 MB reply (either framing) and its message names the cap; a sound reply
    compressed as two gzip members, far under the cap, is read as usual."""
    ask = ([Message.user("Colour?\nA. red\nB. blue")], GenParams(max_tokens=8), [])
    async with await start_sim(SimConfig(), routes=HostileRoutes()) as sim:
        for behaviour in ("huge", "huge-chunked", "gzip-bomb"):
            for name, p in _providers(f"{sim.url}/hostile/{behaviour}", 1024 * 1024).items():
                try:
                    with pytest.raises(ProviderError) as info:
                        await p.complete(*ask)
                finally:
                    await p.close()
                assert (info.value.kind, info.value.message) == \
                    ("permanent", "reply larger than 1 MB (--max-response-mb)"), (name, behaviour)
        for name, p in _providers(f"{sim.url}/hostile/gzip-members", 1024).items():
            try:
                out = await p.complete(*ask)
            finally:
                await p.close()
            assert out.text in ("A", "B") and out.usage.output_tokens > 0, name
