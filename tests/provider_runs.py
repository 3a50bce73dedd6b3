"""`evalkit run mcq` against the simulator through each provider, as the bounded-waits and adaptive-limits
runs make it: the flags and fake keys that point a provider at the simulator, the command in a child
process (or run()'s keywords for this process), and the check that every query was answered."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from cli_under_test import run_cli
from sim_providers import key_env, plain_providers
from sim_providers import pointed_at as sim_pointed_at

from evalkit.sim.server import SimThread

# The registry's providers on the simulator's plain routes (tests/sim_providers.py), each with a fake key
# where it needs one.
KEYS = {p: key_env(p, f"{p}-test-bounded") for p in plain_providers()}


def pointed_at(provider: str, url: str) -> tuple[list[str], dict[str, str]]:
    """(flags, environment) that send `provider` to the simulator at url, with a fake key."""
    return sim_pointed_at(provider, url, key_env(provider, f"{provider}-test-bounded"))


def in_process(provider: str, url: str) -> tuple[dict[str, object], dict[str, str]]:
    """(run() keywords, environment) that send `provider` to the simulator at url, like pointed_at()."""
    flags, env = pointed_at(provider, url)
    return ({"base_url": flags[1]} if flags else {}), env


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
