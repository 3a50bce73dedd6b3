"""End to end through the real pipeline and the simulated server: faults, resume, cache, keys."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_data import draw_image, make_mcq_jsonl
from waiting import wait_for_lines, wait_until_idle

from evalkit.cli import main
from evalkit.engine.evaluate import run
from evalkit.sim.answerkey import AnswerKey
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

ALL_FAULTS = ("429", "500", "503", "hang", "drop", "malformed", "empty")


def key_for(data: Path, **opts) -> AnswerKey:
    return answer_key_for("mcq", {"data": str(data), **opts})


def read_records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_faults_every_query_answered_exactly_once(tmp_path, fast_backoff, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 500)
    # a hang outlasts the client's timeout (hanging requests are released when the server closes);
    # the timeout leaves ordinary answers time enough (the slowest here: 0.13 s quiet, 0.57 s beside
    # four CPU-bound processes on two cores, though over 2 s once in a whole loaded suite); an answer
    # still later is asked again, and the server counts the first as abandoned, never delivered
    faults = SimFaults(rate=0.3, kinds=ALL_FAULTS, retry_after=0.05, hang_s=10.0, seed=3)
    with SimThread(SimConfig(answer_key=key_for(data), faults=faults)) as sim:
        res = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                  cache_dir=str(tmp_path / "cache"), timeout=4.0, concurrency=32, max_attempts=14, progress=False)
        counters = sim.counters.snapshot()
    assert res.exit_code == 0
    recs = read_records(tmp_path / "run")
    assert len(recs) == 500 and len({r["query_id"] for r in recs}) == 500
    assert all(r["error"] is None for r in recs)
    assert res.summary["metrics"]["accuracy"] == 100.0  # a perfect model, faults or not
    assert res.summary["counts"]["correct"] == 500
    # the server delivered exactly one successful completion per query: any other was answered after the
    # client had given up on it (its timeout, on a busy machine), and never reached it
    assert counters["completions"] - counters["abandoned"] == 500, counters
    assert len(counters["per_key"]) == 500 and sum(counters["per_key"].values()) == counters["completions"]
    assert all(counters["faults"].get(k, 0) > 0 for k in ALL_FAULTS), counters["faults"]


@pytest.mark.slow
def test_resume_after_sigkill_sends_only_what_is_missing(tmp_path, no_plots):
    n = 200
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=5)
    params = SimParams(theta=0.7, r=0.9, g=0.25, seed=11, style="mixed")
    cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model", "--data", str(data),
           "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--concurrency", "4",
           "--no-progress"]
    with SimThread(SimConfig(answer_key=key_for(data), params=params, latency_s=0.04)) as sim:
        full = cmd + ["--base-url", sim.url]
        sim.hold(after=3 * n // 4)  # the run cannot end before the kill: three quarters, then the gate
        proc = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        records = tmp_path / "run" / "records.jsonl"
        try:
            wait_for_lines(records, n // 2, proc)
            proc.send_signal(signal.SIGKILL)  # mid-way: answers arriving, being recorded and stored
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            sim.release()
        wait_until_idle(sim)  # the server finishes answering requests that were in flight at the kill
        done_at_kill = records.read_text().count("\n")
        assert n // 2 <= done_at_kill <= 3 * n // 4
        before = sim.counters.snapshot()["completions"]
        # the same command again, in this process (a second interpreter start buys nothing here)
        assert main(full[3:]) == 0
        sent_again = sim.counters.snapshot()["completions"] - before
        # only the missing queries were sent: records still buffered at the kill (up to 100 ms of them,
        # see evalkit/rundir/layout.py) and answers being stored come from the cache
        assert sent_again <= n - done_at_kill
        per_key = sim.counters.snapshot()["per_key"]
        # only requests in flight at the kill (4), and answers of the cache batch being committed then
        assert sum(1 for v in per_key.values() if v > 1) <= 2 * 4
        # an uninterrupted run (fresh directory, no cache) gives the same metrics and counts
        res = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "fresh"),
                  no_cache=True, progress=False, concurrency=16)
    recs = read_records(tmp_path / "run")
    assert len(recs) == n and len({r["query_id"] for r in recs}) == n
    resumed = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert sent_again + resumed["cache"]["hits"] == n - done_at_kill  # every answer received was kept
    assert resumed["metrics"] == res.summary["metrics"]
    assert resumed["counts"] == res.summary["counts"]
    assert 40 < res.summary["metrics"]["accuracy"] < 95  # a non-trivial model, so equality means something


def test_identical_rerun_sends_nothing(tmp_path, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 60, seed=2)
    params = SimParams(theta=0.6, r=0.9, seed=4, style="verbose")
    common = dict(data=str(data), cache_dir=str(tmp_path / "cache"), progress=False)
    with SimThread(SimConfig(answer_key=key_for(data), params=params)) as sim:
        first = run("mcq", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "a"), **common)
        n1 = sim.counters.snapshot()["requests"]
        again = run("mcq", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "a"), **common)
        other_dir = run("mcq", "vllm/sim-model", base_url=sim.url, out=str(tmp_path / "b"), **common)
        n2 = sim.counters.snapshot()["requests"]
    assert n1 == 60 and n2 == n1  # zero requests for the re-runs
    for res in (again, other_dir):
        assert res.summary["metrics"] == first.summary["metrics"]
        assert res.summary["counts"] == first.summary["counts"]
    assert other_dir.summary["cache"]["hits"] == 60


def test_same_question_different_images_after_resize(tmp_path):
    folder = tmp_path / "ds"
    (folder / "images").mkdir(parents=True)
    opts = {"A": "red", "B": "blue", "C": "green", "D": "white"}
    lines = []
    for i, gold in enumerate("AB"):
        draw_image(100 + i, size=400).save(folder / "images" / f"{i}.png")
        lines.append({"id": f"x{i}", "image": f"images/{i}.png", "question": "Which colour is the ball?",
                      "options": opts, "answer": gold})
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with SimThread(SimConfig(answer_key=key_for(data))) as sim:
        res = run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                  no_cache=True, progress=False, max_side=150)
    recs = {r["item_id"]: r for r in read_records(tmp_path / "run")}
    assert recs["x0"]["parsed"] == "A" and recs["x1"]["parsed"] == "B"
    assert res.summary["metrics"]["accuracy"] == 100.0


def test_secrets_never_leave_the_process(tmp_path, monkeypatch, capfd, fast_backoff):
    data = make_mcq_jsonl(tmp_path / "ds", 30, seed=9)
    secret = "sk-test-SECRET123"
    for k in [k for k in os.environ if k.startswith(("OPENAI", "VLLM"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # the CLI reads it from the environment
    faults = SimFaults(rate=0.2, kinds=("429", "500"), retry_after=0.05, seed=2)
    with SimThread(SimConfig(answer_key=key_for(data), params=SimParams(style="mixed"), faults=faults)) as sim:
        code = main(["run", "mcq", "--model", "openai/sim-model", "--base-url", sim.url + "/v1", "--data", str(data),
                     "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
                     "--judge", "openai/sim-model", "--judge-base-url", sim.url + "/v1"])
    out = capfd.readouterr()  # everything written to stdout and stderr, at the file-descriptor level
    assert code == 0, out.err
    assert out.out and secret not in out.out and secret not in out.err
    files = [p for d in (tmp_path / "run", tmp_path / "cache") for p in d.rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert secret.encode() not in p.read_bytes(), p


def test_cache_tag_survives_a_moved_server(tmp_path, no_plots):
    data = make_mcq_jsonl(tmp_path / "ds", 20, seed=21)
    common = dict(data=str(data), cache_dir=str(tmp_path / "cache"), progress=False, cache_tag="my-qwen")
    with SimThread(SimConfig(answer_key=key_for(data))) as a:
        first = run("mcq", "vllm/sim-model", base_url=a.url, out=str(tmp_path / "a"), **common)
    with SimThread(SimConfig(answer_key=key_for(data))) as b:  # another port
        second = run("mcq", "vllm/sim-model", base_url=b.url, out=str(tmp_path / "b"), **common)
        assert b.counters.snapshot()["requests"] == 0
    assert a.url != b.url and second.summary["cache"]["hits"] == 20
    assert second.summary["metrics"] == first.summary["metrics"]
