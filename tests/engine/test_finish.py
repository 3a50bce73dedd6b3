"""A cheap finish: report.md before the plots, plots skipped when what they show is unchanged,
cached queries looked up in batches (no decode for a hit's fingerprints), and a run stopped by
SIGTERM that loses no answer it received."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from echo_provider import Echo, echo_queries
from run_factory import make_run, record
from synthetic_data import make_mcq_jsonl
from waiting import StderrWatch, wait_until_idle

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.store.cache import ResponseCache
from evalkit.core.types import Query, Response, Usage
from evalkit.images.pipeline import ImagePipeline
from evalkit.report import figures, plots
from evalkit.report.plot_process import PlotProcess
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

# ------------------------------------------------------------------ plots


def _records(flip: int | None = None) -> list:
    return [record(f"q{i}", (i % 3 != 0) != (i == flip), category=f"c{i % 2}") for i in range(60)]


def _count_saves(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    saved: list[Path] = []
    real = plots._save

    def counting(fig, path, title):  # noqa: ANN001, ANN202 - plots._save's own signature
        saved.append(Path(path))
        return real(fig, path, title)

    monkeypatch.setattr(plots, "_save", counting)
    return saved


def test_plots_skipped_when_inputs_unchanged_and_redrawn_when_they_change(tmp_path, monkeypatch):
    run_dir = make_run(tmp_path / "run", "m", _records(), plots=True)
    plot_dir = run_dir / "plots"
    pngs = sorted(plot_dir.glob("*.png"))
    assert pngs and (plot_dir / figures.STAMP).is_file()
    mtimes = {p: p.stat().st_mtime_ns for p in pngs}
    saved = _count_saves(monkeypatch)

    make_run(tmp_path / "run", "m", _records(), plots=True)  # the same records again
    assert saved == []
    assert {p: p.stat().st_mtime_ns for p in pngs} == mtimes
    assert "![" in (run_dir / "report.md").read_text()  # the report still shows them

    make_run(tmp_path / "run", "m", _records(flip=3), plots=True)  # one verdict changed
    assert sorted(saved) == pngs

    saved.clear()
    pngs[0].unlink()  # a figure gone: all are drawn again
    make_run(tmp_path / "run", "m", _records(flip=3), plots=True)
    assert sorted(saved) == pngs


def _analysed(tmp_path: Path):  # noqa: ANN202
    from evalkit.benchmarks import get_benchmark
    from evalkit.metrics.analysis.result import analyze

    return analyze("m", get_benchmark("mcq"), _records(), {}, n_boot=200)


def test_plot_process_draws_the_same_figures_and_leaves_nothing_running(tmp_path):
    analysis = _analysed(tmp_path)
    here = figures.draw_all(tmp_path / "here", [analysis])
    with PlotProcess() as plotter:
        child = plotter._proc
        there = figures.draw_all(tmp_path / "there", [analysis], plotter=plotter)
    assert [t for t, _ in there] == [t for t, _ in here] and len(here) >= 2
    for (_, a), (_, b) in zip(here, there, strict=True):
        assert b.parent == tmp_path / "there" and b.name == a.name and b.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert abs(b.stat().st_size - a.stat().st_size) < 0.05 * a.stat().st_size  # the same chart
    assert (tmp_path / "there" / figures.STAMP).read_text() == (tmp_path / "here" / figures.STAMP).read_text()
    assert child is not None and child.poll() is not None  # it drew, answered and exited

    unused = PlotProcess()
    proc = unused._proc
    unused.close()  # nothing to draw (e.g. the plots are unchanged): the child exits at once
    assert proc is not None and proc.poll() is not None


def test_plot_process_that_cannot_start_or_fails_falls_back_to_drawing_here(tmp_path, monkeypatch):
    analysis = _analysed(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with PlotProcess() as plotter:
        drawn = figures.draw_all(tmp_path / "a", [analysis], plotter=plotter)
    assert drawn and all(p.is_file() for _, p in drawn)
    monkeypatch.undo()
    broken = PlotProcess()
    broken._proc.kill()  # type: ignore[union-attr]  # dies before it answers
    broken._proc.wait()  # type: ignore[union-attr]
    drawn = figures.draw_all(tmp_path / "b", [analysis], plotter=broken)
    assert drawn and all(p.is_file() for _, p in drawn)


def test_report_md_is_written_before_the_plots(tmp_path, monkeypatch):
    seen: list[str] = []
    real = figures.draw_all

    def checking(plot_dir, results, **kw):  # noqa: ANN001, ANN202
        seen.append((Path(plot_dir).parent / "report.md").read_text())
        return real(plot_dir, results, **kw)

    monkeypatch.setattr(figures, "draw_all", checking)
    run_dir = make_run(tmp_path / "run", "m", _records(), plots=True)
    assert len(seen) == 1 and "## Plots" in seen[0] and "plots/categories.png" in seen[0]
    assert seen[0] == (run_dir / "report.md").read_text()


def test_digest_follows_what_the_figures_show():
    from evalkit.benchmarks import get_benchmark
    from evalkit.metrics.analysis.result import analyze

    bench = get_benchmark("mcq")
    a = analyze("m", bench, _records(), {}, n_boot=50)
    b = analyze("m", bench, _records(), {}, n_boot=50)
    c = analyze("m", bench, _records(flip=4), {}, n_boot=50)
    assert figures.inputs_digest([a]) == figures.inputs_digest([b]) != figures.inputs_digest([c])


# ------------------------------------------------------------------ batched cache lookups


def test_get_many_agrees_with_get(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    for i in range(1200):
        cache.set(f"k{i}", {"text": str(i)})
    cache._cache.set("broken", "{not json", retry=True)  # a damaged entry is a miss, as with get()
    keys = [f"k{i}" for i in range(0, 1200, 2)] + ["missing", "broken"]
    got = cache.get_many(keys)
    assert got == {k: {"text": k[1:]} for k in keys[:-2]}
    assert (cache.hits, cache.misses) == (600, 2)
    assert {k: cache.get(k) for k in keys if cache.get(k) is not None} == got
    cache.close()


def test_set_many_stores_like_set(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    cache.set("old", {"text": "before"})
    cache.set_many([("old", {"text": "after"}), ("new", {"text": "n"}), ("new", {"text": "last wins"})])
    assert cache.get_many(["old", "new"]) == {"old": {"text": "after"}, "new": {"text": "last wins"}}
    assert len(cache) == 2 and cache.stats().entries == 2  # diskcache's own count follows
    with pytest.raises(TypeError):
        cache.set_many([("x", {"text": float("nan")})])  # checked before anything is written
    assert "x" not in cache
    cache.close()


def _ask_all(cache_dir: Path, queries: list[Query]) -> tuple[list, Echo, ImagePipeline, int]:
    provider, pipeline, cache = Echo(), ImagePipeline(), ResponseCache(cache_dir)
    single_gets = 0
    real_get = cache.get

    def counting_get(key: str):  # noqa: ANN202
        nonlocal single_gets
        single_gets += 1
        return real_get(key)

    cache.get = counting_get  # type: ignore[method-assign]
    runner = Runner(provider, limiter=Limiter(concurrency=8), cache=cache, pipeline=pipeline,
                    policy=RetryPolicy(max_attempts=2))
    outcomes: list = []
    try:
        asyncio.run(runner.run(queries, outcomes.append, workers=8))
    finally:
        cache.close()
        pipeline.close()
    return outcomes, provider, pipeline, single_gets


def test_cached_queries_are_looked_up_in_batches_without_decoding(tmp_path):
    queries = echo_queries(300)
    first, p1, _, _ = _ask_all(tmp_path / "cache", queries)
    assert p1.sent == 300 and not any(o.cached for o in first)
    again, p2, pipeline, single_gets = _ask_all(tmp_path / "cache", queries)
    assert p2.sent == 0 and all(o.cached for o in again) and len(again) == 300
    assert single_gets == 0  # one get_many per chunk, no per-query lookup
    assert pipeline.stats.decodes == 0 and pipeline.stats.fp_decodes == 0  # fingerprints came with the answers
    fps = {o.query.id: o.image_fps for o in first}
    assert all(o.image_fps == fps[o.query.id] and o.image_fps for o in again)


# ------------------------------------------------------------------ stopping a run


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path}: fewer than {n} records after {timeout}s (exit {proc.poll()})")


@pytest.mark.slow
def test_sigterm_keeps_every_answer_and_resume_sends_only_what_is_missing(tmp_path):
    n, workers = 240, 6
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=8)
    key = answer_key_for("mcq", {"data": str(data)})
    records = tmp_path / "run" / "records.jsonl"
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.8, seed=2), latency_s=0.03)) as sim:
        cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model", "--data", str(data),
               "--base-url", sim.url, "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
               "--concurrency", str(workers), "--no-progress"]
        sim.hold(after=n // 2)  # the run cannot end before the signal: half the answers, then the gate
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stderr = StderrWatch(proc)
        try:
            _wait_for_lines(records, n // 3, proc)
            proc.send_signal(signal.SIGTERM)  # mid-way: answers arriving, being recorded and stored
            stderr.until("interrupted: receiving the replies already on their way")
            sim.release()  # whatever waits at the gate is on its way
            _, err = stderr.finish(timeout=120)
        finally:
            sim.release()
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "re-run the same command to resume" in err
        wait_until_idle(sim)  # the server has answered every request it received
        kept = {r["query_id"] for r in _lines(records) if r["error"] is None}
        assert n // 3 <= len(kept) <= n // 2 + workers
        before = sim.counters.snapshot()["completions"]
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        sent_again = sim.counters.snapshot()["completions"] - before
        per_key = sim.counters.snapshot()["per_key"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    from_cache = summary["cache"]["hits"]
    # every query exactly once: kept by the first run, or from the cache, or sent by the second
    assert len(kept) + from_cache + sent_again == n
    assert from_cache <= workers  # the buffer was written at the signal (answers mid-store at most)
    assert sum(1 for v in per_key.values() if v > 1) <= workers  # only requests in flight at the signal
    final = _lines(records)
    assert len(final) == n and len({r["query_id"] for r in final}) == n and summary["complete"]


def test_no_cache_run_writes_each_record_as_it_arrives(tmp_path):
    n, workers = 300, 4
    data = make_mcq_jsonl(tmp_path / "ds", n, seed=9)
    key = answer_key_for("mcq", {"data": str(data)})
    records = tmp_path / "run" / "records.jsonl"
    with SimThread(SimConfig(answer_key=key, latency_s=0.02)) as sim:
        cmd = [sys.executable, "-m", "evalkit.cli", "run", "mcq", "--model", "vllm/sim-model", "--data", str(data),
               "--base-url", sim.url, "--out", str(tmp_path / "run"), "--no-cache", "--concurrency", str(workers),
               "--no-progress"]
        sim.hold(after=n // 2)  # the run cannot end before the kill: half the answers, then the gate
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for_lines(records, n // 3, proc)
            proc.send_signal(signal.SIGKILL)  # mid-way: answers arriving and being written
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
            sim.release()
        wait_until_idle(sim)  # requests in flight at the kill are finished on the server
        completed = sim.counters.snapshot()["completions"]
    on_disk = len({r["query_id"] for r in _lines(records)})
    # nothing else keeps these answers: all but those in flight at the kill are on disk
    assert completed - workers <= on_disk <= completed


def test_cli_run_draws_its_plots_in_a_child_process(tmp_path, monkeypatch):
    from evalkit.cli import main

    started: list[PlotProcess] = []
    real_init = PlotProcess.__init__

    def tracking(self: PlotProcess, **kw: bool) -> None:
        real_init(self, **kw)
        started.append(self)

    monkeypatch.setattr(PlotProcess, "__init__", tracking)
    monkeypatch.setattr(plots, "pyplot", lambda: pytest.fail("the CLI's own process drew a plot"))
    data = make_mcq_jsonl(tmp_path / "ds", 12, seed=2)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        code = main(["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--base-url", sim.url,
                     "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
    assert code == 0 and len(started) == 1 and started[0]._proc is None  # used, and gone
    report = (tmp_path / "run" / "report.md").read_text()
    pngs = sorted(p.name for p in (tmp_path / "run" / "plots").glob("*.png"))
    assert pngs == ["categories.png", "confusion.png"] and all(f"plots/{p}" in report for p in pngs)


class _Crashing(Echo):
    """Answers "A", except that the adapter raises what it did not foresee on every third query."""

    async def complete(self, messages, params, images):  # noqa: ANN001, ANN201
        self.sent += 1
        if "Question 2?" in messages[0].text() or "Question 5?" in messages[0].text():
            raise AttributeError("'int' object has no attribute 'strip'")
        return Response(text="A", usage=Usage(10, 1))


def test_an_unclassified_adapter_exception_is_that_querys_error_and_is_not_retried(tmp_path):
    provider, pipeline, cache = _Crashing(), ImagePipeline(), ResponseCache(tmp_path / "cache")
    runner = Runner(provider, limiter=Limiter(concurrency=4), cache=cache, pipeline=pipeline,
                    policy=RetryPolicy(max_attempts=5, initial_s=0.001))
    outcomes: list = []
    try:
        asyncio.run(runner.run(echo_queries(8), outcomes.append, workers=4))
    finally:
        cache.close()
        pipeline.close()
    assert len(outcomes) == 8  # no worker died: every query reached the sink
    bad = sorted(o.query.id for o in outcomes if not o.response.ok)
    assert bad == ["q2", "q5"] and provider.sent == 8  # each sent once: a bug is not paid for again
    message = next(o.response.error_message for o in outcomes if o.query.id == "q2")
    assert message.startswith("unexpected AttributeError in the vllm adapter: 'int' object")
    assert sum(o.response.text == "A" for o in outcomes) == 6
