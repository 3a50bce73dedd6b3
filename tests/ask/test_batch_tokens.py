"""`--batch-tokens N` (issue 32, item 6): the enqueued-token limit OpenAI and Azure enforce per model. No
batch holds more than N input tokens, and a batch is submitted only when this run's batches still queued
at the provider leave room for it; with --no-wait, what does not fit is left for the next run."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 10
ENV = {"OPENAI_API_KEY": "sk-test"}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return make_mcq_jsonl(tmp_path / "ds", N, seed=41)


def _run(sim: SimThread, data: Path, out: Path, **kw):
    return run("mcq", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, out=str(out),
               cache_dir=str(out.parent / "cache"), progress=False, plots=False, batch=True, **kw)


def _line_tokens(sim: SimThread, data: Path, out: Path) -> int:
    """One line's input tokens as --batch-tokens counts them (every question here is about the same size)."""
    from evalkit.money.costs import image_tokens

    res = _run(sim, data, out, limit=1, no_cache=True)
    assert res.exit_code == 0
    record = res.records[0]
    return len(record.prompt) // 4 + sum(image_tokens("openai", w, h) for w, h in record.image_sizes)


def test_batches_hold_at_most_the_limit_and_wait_for_room(data, tmp_path):
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        per_line = _line_tokens(sim, data, tmp_path / "probe")
        sim.batches.behaviour.delay_s = 0.05  # each batch stays queued a while: the next must wait for room
        before = set(sim.batches.batches)
        res = _run(sim, data, tmp_path / "run", batch_tokens=3 * per_line + per_line // 2, limit=6)
        batches = sorted((b for k, b in sim.batches.batches.items() if k not in before), key=lambda b: b.created)
    assert res.exit_code == 0 and res.summary["metrics"]["accuracy"] == 100.0
    assert [len(b.lines) for b in batches] == [3, 3]  # at most 3 lines' tokens in a batch, one after the other
    first, second = batches  # never two queued at once: the second created after the first ended
    assert first.ended_at is not None and second.created >= first.ended_at
    assert len(res.records) == 6  # every line submitted once


def test_with_no_wait_what_does_not_fit_is_left_for_the_next_run(data, tmp_path):
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        per_line = _line_tokens(sim, data, tmp_path / "probe")
        sim.batches.behaviour.frozen = True
        first = _run(sim, data, tmp_path / "run", batch_tokens=5 * per_line + per_line // 2, wait=False)
        assert first.exit_code == 1 and sum(len(b.lines) for b in sim.batches.batches.values()) == 1 + 5
        sim.batches.behaviour.frozen = False
        second = _run(sim, data, tmp_path / "run", batch_tokens=5 * per_line + per_line // 2)
    assert second.exit_code == 0 and second.summary["metrics"]["accuracy"] == 100.0
    assert sum(len(b.lines) for b in sim.batches.batches.values()) == 1 + N  # each line submitted once
