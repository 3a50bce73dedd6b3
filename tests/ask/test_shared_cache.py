"""`--cache-url redis://…` (issue 32, item 1) against a real redis-server: a second machine with a fresh local
cache re-runs a finished evaluation for free; an unreachable Redis is one line and exit 2 before anything is
sent; a Redis that dies mid-run stops the run (exit 1, resumable) or, with --cache-fallback local, is one
line; `evalkit cache` works on it; the password reaches neither disk nor console; without a URL, redis-py is
never imported."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_under_test import run_main
from redis_server import RedisServer, redis_binary
from synthetic_data import make_mcq_jsonl

from evalkit.ask.shared.cache import PREFIX, check_url, shown_url
from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 6
PASSWORD = "team-redis-canary-9e107d9d372bb6826bd81d3542a419d6"
ENV = {"OPENAI_API_KEY": "", "VLLM_API_KEY": ""}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_mcq_jsonl(tmp_path / "ds", N, seed=21)


@pytest.fixture
def redis(tmp_path: Path):
    redis_binary()
    with RedisServer(tmp_path / "redis", password=PASSWORD) as server:
        yield server


def _sim(data: Path) -> SimThread:
    return SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)})))


def _run(sim: SimThread, data: Path, out: Path, cache: Path, **kw):
    return run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, out=str(out),
               cache_dir=str(cache), progress=False, plots=False, **kw)


def _completions(sim: SimThread) -> int:
    return sim.counters.snapshot()["completions"]


def _nowhere(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_urls_are_checked_and_shown_without_their_password():
    assert shown_url(f"redis://:{PASSWORD}@h:6379/0") == "redis://:***@h:6379/0"
    assert shown_url("rediss://user:pw@h:6380/2") == "rediss://user:***@h:6380/2"
    assert shown_url("redis://h:6379/0") == "redis://h:6379/0"
    for bad in ("http://h:6379", "redis://", "redis://h:port/0", "h:6379"):
        with pytest.raises(EvalkitError, match="--cache-url"):
            check_url(bad)


def test_a_second_machine_re_runs_a_finished_evaluation_for_free(data, redis, tmp_path):
    with _sim(data) as sim:
        first = _run(sim, data, tmp_path / "a" / "run", tmp_path / "a" / "cache", cache_url=redis.url)
        assert first.exit_code == 0 and _completions(sim) == N
        assert len(list(redis.client().scan_iter(match=PREFIX + "*"))) == N
        second = _run(sim, data, tmp_path / "b" / "run", tmp_path / "b" / "cache", cache_url=redis.url)
        assert second.exit_code == 0 and _completions(sim) == N  # nothing sent by the second machine
        assert second.summary["cache"]["hits"] == N
        assert second.summary["metrics"] == first.summary["metrics"]
        # what it read is now in its own local cache: without Redis, it still sends nothing
        third = _run(sim, data, tmp_path / "b" / "run3", tmp_path / "b" / "cache")
        assert third.exit_code == 0 and _completions(sim) == N
    assert _nowhere(tmp_path / "a", PASSWORD) == [] and _nowhere(tmp_path / "b", PASSWORD) == []


def test_an_unreachable_redis_is_one_line_and_exit_2_before_anything_is_sent(data, redis, tmp_path):
    redis.kill()
    with _sim(data) as sim:
        done = run_main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url + "/v1", "--data", str(data),
                        "--cache-url", redis.url, "--no-progress", "--cache-dir", str(tmp_path / "cache")],
                       env=ENV, cwd=tmp_path)
        assert sim.counters.snapshot()["requests"] == 0
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out[-2000:]
    errors = [line for line in out.splitlines() if line.startswith("evalkit: error:")]
    assert len(errors) == 1 and "cannot reach Redis at redis://:***@127.0.0.1:" in errors[0]
    assert PASSWORD not in out


def test_a_redis_that_dies_mid_run_stops_the_run_and_the_same_command_resumes(data, redis, tmp_path):
    with _sim(data) as sim:
        sim.hold(after=2)  # two answers come back; the rest wait at the gate while Redis dies
        args = ["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url + "/v1", "--data", str(data),
                "--cache-url", redis.url, "--no-progress", "--concurrency", "2", "--out", str(tmp_path / "run"),
                "--cache-dir", str(tmp_path / "cache")]
        proc = subprocess.Popen([sys.executable, "-m", "evalkit.cli", *args], cwd=tmp_path,
                                env={**_clean_env(), **ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        _until(lambda: sim.held >= 1, "a request held at the gate")
        redis.kill()
        sim.release()
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (out + err)[-3000:]
        assert "the shared cache at redis://:***@" in err and "re-run the same command" in err
        assert "Traceback" not in out + err and PASSWORD not in out + err
        kept = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
        assert kept and all(r["error"] is None for r in kept)
        sent = _completions(sim)
        redis.start()  # back (empty: it kept nothing); the same command sends only what is missing
        again = run_main(args, env=ENV, cwd=tmp_path)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        assert _completions(sim) - sent <= N - len(kept)


def test_with_fallback_a_redis_that_dies_is_one_line_and_the_run_goes_on(data, redis, tmp_path):
    with _sim(data) as sim:
        sim.hold(after=2)
        result: list = []
        worker = threading.Thread(target=lambda: result.append(_run(
            sim, data, tmp_path / "run", tmp_path / "cache", cache_url=redis.url, cache_fallback="local",
            concurrency=2)))
        worker.start()
        _until(lambda: sim.held >= 1, "a request held at the gate")
        redis.kill()
        sim.release()
        worker.join(120)
        res = result[0]
        lines = [m for m in res.messages if "stopped answering" in m]
    assert res.exit_code == 0 and len(res.records) == N and res.summary["metrics"]["accuracy"] == 100.0
    assert res.summary["cache"]["misses"] == N and _completions(sim) == N
    assert len(lines) == 1 and "going on with the local cache only" in lines[0]  # said once
    assert PASSWORD not in lines[0]


def test_cache_stats_and_clear_work_on_redis_and_clear_asks_first(data, redis, tmp_path):
    with _sim(data) as sim:
        _run(sim, data, tmp_path / "run", tmp_path / "cache", cache_url=redis.url)
    stats = run_main(["cache", "stats", "--cache-url", redis.url], env={}, cwd=tmp_path)
    assert stats.returncode == 0 and f"{N} responses" in stats.stdout and PASSWORD not in stats.stdout
    refused = run_main(["cache", "clear", "--cache-url", redis.url], env={}, cwd=tmp_path)
    assert refused.returncode == 2 and "--yes" in refused.stdout + refused.stderr
    assert len(list(redis.client().scan_iter(match=PREFIX + "*"))) == N
    cleared = run_main(["cache", "clear", "--cache-url", redis.url, "--yes"], env={}, cwd=tmp_path)
    assert cleared.returncode == 0 and f"removed {N}" in cleared.stdout
    assert list(redis.client().scan_iter(match=PREFIX + "*")) == []


def test_without_a_cache_url_redis_is_never_imported(data, tmp_path):
    code = ("import sys\nfrom evalkit.cli import main\n"
            f"main(['run', 'mcq', '--model', 'vllm/m', '--data', {str(data)!r}, '--dry-run', '--base-url', "
            "'http://127.0.0.1:9/v1'])\nprint('redis' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**_clean_env(), **ENV},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().endswith("False"), done.stdout + done.stderr


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("EVALKIT_")}


def _until(condition, what: str, deadline_s: float = 60.0) -> None:  # noqa: ANN001
    import time

    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {deadline_s} s"
        time.sleep(0.01)
