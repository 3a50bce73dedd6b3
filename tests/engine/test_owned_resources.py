"""Owned resources: when run() fails mid-way, nothing is left open and no answer received is lost.

A fatal error (here: the record hook raises after a few records, as a full disk would in the sink)
stops new requests, lets those in flight finish, records and caches their answers, then closes
the providers, the cache, the image pipeline's threads and the records file.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import threading
from pathlib import Path

import aiohttp
import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread


class Boom(Exception):
    pass


def _open_fds() -> set[str]:
    """What this process's descriptors point at (sockets, files), by target."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
    return out


def _open_sessions() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession) and not o.closed)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to list open files")
@pytest.mark.slow
def test_failure_mid_run_leaks_nothing_and_loses_no_answer(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 120)
    key = answer_key_for("mcq", {"data": str(data)})
    opts = {"data": str(data), "out": str(tmp_path / "run"), "cache_dir": str(tmp_path / "cache"),
            "concurrency": 8, "progress": False}
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=1.0), faults=SimFaults(latency_s=0.02))) as sim:
        threads_before = {t.ident for t in threading.enumerate()}
        files_before = {f for f in _open_fds() if str(tmp_path) in f}
        sessions_before = _open_sessions()
        seen = []

        def hook() -> None:
            seen.append(1)
            if len(seen) >= 30:
                raise Boom("the sink failed")

        with pytest.raises(Boom):
            run("mcq", "vllm/sim-model", base_url=sim.url, on_record=hook, **opts)
        answered = sim.counters.snapshot()["completions"]

        leftover = [t for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()
                    and not t.name.startswith("evalkit-sim")]  # the simulator's own threads live on with it
        assert leftover == [], f"threads left running: {[t.name for t in leftover]}"
        assert {f for f in _open_fds() if str(tmp_path) in f} == files_before  # records file, cache db closed
        assert _open_sessions() == sessions_before

        records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
        assert 30 <= len(records) == answered < 120  # stopped early; every answer received is recorded
        assert all(r["error"] is None for r in records)

        # and the resume pays only for what was never answered
        result = run("mcq", "vllm/sim-model", base_url=sim.url, **opts)
        assert result.exit_code == 0 and result.summary["metrics"]["accuracy"] == 100.0
        assert sim.counters.snapshot()["completions"] - answered == 120 - answered
