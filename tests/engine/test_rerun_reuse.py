"""The same command on a complete run directory reuses what the last full evaluation wrote (issue 35
item 16; engine/reuse.py): every file byte-identical to a full re-evaluation, the same result, and any
change to the records, the data, a setting or evalkit's version takes the full path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_data import make_mcq_jsonl

import evalkit.engine.asking as asking
import evalkit.engine.evaluate as evaluate
import evalkit.engine.reuse as reuse
from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

N = 8
WRITTEN = ("summary.json", "report.md", "records.jsonl", "manifest.json", "config.json", "lint.json")


@pytest.fixture(scope="module")
def sim_data(tmp_path_factory):
    data = make_mcq_jsonl(tmp_path_factory.mktemp("ds"), N, seed=5)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        yield sim, data


@pytest.fixture
def full_paths(monkeypatch):
    """How many runs took the full path (asked through engine/asking.py); [1]: how many read the data."""
    count = [0, 0]
    real_ask, real_prepare = asking.ask, evaluate.prepare_data

    async def counted(*args, **kwargs):
        count[0] += 1
        return await real_ask(*args, **kwargs)

    def prepared(*args, **kwargs):
        count[1] += 1
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(asking, "ask", counted)
    monkeypatch.setattr(evaluate, "prepare_data", prepared)
    return count


def _run(sim, data: Path, out: Path, **extra):
    return run("mcq", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(out),
               cache_dir=str(out.parent / "cache"), quiet=True, **extra)


def _files(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in WRITTEN}


def test_the_same_command_reuses_the_outputs_byte_for_byte(tmp_path, sim_data, full_paths, no_plots):
    sim, data = sim_data
    out = tmp_path / "run"
    cold = _run(sim, data, out)
    assert cold.exit_code == 0 and cold.summary["this_run"]["sent"] == N and full_paths[0] == 1
    assert (out / reuse.STAMP).is_file()

    fast = _run(sim, data, out)  # nothing changed since: the outputs stand, the data is not even read
    assert full_paths == [1, 1]
    reused = _files(out)
    (out / reuse.STAMP).unlink()  # the same command again, made to take the full path
    full = _run(sim, data, out)
    assert full_paths[0] == 2
    assert _files(out) == reused  # what the full re-evaluation writes is what was reused, byte for byte
    assert fast.summary == full.summary and fast.summary["this_run"] == {"sent": 0, "from_cache": 0, "already": N, "cost_usd": 0.0}
    assert fast.exit_code == full.exit_code == 0 and fast.messages == full.messages
    assert repr(fast) == repr(full) and fast._records is None  # (repr reads no record)
    assert fast.to_rows() == full.to_rows() and len(fast.records) == N
    again = _run(sim, data, out)  # the full path stamped it again
    assert full_paths == [2, 2] and again.summary == full.summary
    image = sorted((data.parent / "images").iterdir())[0]
    image.write_bytes(image.read_bytes())  # rewritten, the same bytes: the data is read, its fingerprint equal
    same = _run(sim, data, out)
    assert full_paths == [2, 3] and same.summary == full.summary and _files(out) == reused


def test_without_out_the_data_is_read_first(tmp_path, sim_data, full_paths, no_plots, monkeypatch):
    """The default run directory follows from the data's fingerprint: the check comes after reading it."""
    sim, data = sim_data
    monkeypatch.chdir(tmp_path)
    args = dict(data=str(data), base_url=sim.url, cache_dir=str(tmp_path / "cache"), quiet=True)
    cold = run("mcq", "vllm/sim-model", **args)
    fast = run("mcq", "vllm/sim-model", **args)
    assert full_paths == [1, 2] and fast.out_dir == cold.out_dir and str(fast.out_dir).startswith("runs")
    assert fast.summary["this_run"] == {"sent": 0, "from_cache": 0, "already": N, "cost_usd": 0.0}
    assert fast.messages == cold.messages and fast.to_rows() == cold.to_rows()
    lines = (fast.out_dir / "records.jsonl").read_text().splitlines(keepends=True)
    (fast.out_dir / "records.jsonl").write_text("".join(lines[1:]))
    again = run("mcq", "vllm/sim-model", **args)
    assert full_paths == [2, 3] and again.summary["this_run"] == {"sent": 0, "from_cache": 1, "already": N - 1, "cost_usd": 0.0}


def test_any_change_takes_the_full_path(tmp_path, sim_data, no_plots, full_paths, monkeypatch):
    sim, _ = sim_data
    data = make_mcq_jsonl(tmp_path / "ds", N, seed=5)  # the module's data, a copy this test may edit
    out = tmp_path / "run"
    _run(sim, data, out)
    assert full_paths[0] == 1

    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    (out / "records.jsonl").write_text("".join(lines[:-1]))  # a record gone: asked again
    res = _run(sim, data, out)
    assert full_paths[0] == 2 and res.summary["this_run"] == {"sent": 0, "from_cache": 1, "already": N - 1, "cost_usd": 0.0}

    res = _run(sim, data, out, concurrency=3)  # a setting (not of the run's identity)
    assert full_paths[0] == 3 and res.summary["config"]["concurrency"] == 3
    _run(sim, data, out, concurrency=3)
    assert full_paths[0] == 3  # ... reused once it is the one that ran

    with monkeypatch.context() as m:
        m.setattr(reuse, "__version__", "9.9.9")  # another evalkit
        _run(sim, data, out, concurrency=3)
    assert full_paths[0] == 4

    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "complete": False}))  # an output edited
    res = _run(sim, data, out, concurrency=3)
    assert full_paths[0] == 5 and res.summary["complete"] is True  # rewritten by the full path

    items = [json.loads(line) for line in data.read_text().splitlines()]
    items[0]["answer"] = "ABCD"[("ABCD".index(items[0]["answer"]) + 1) % 4]  # a gold answer edited
    data.write_text("".join(json.dumps(x) + "\n" for x in items))
    with pytest.raises(EvalkitError, match="changed"):  # refused, as the full path refuses other data
        _run(sim, data, out, concurrency=3)
    before = res.summary["counts"]["correct"]
    res = _run(sim, data, out, concurrency=3, reask_changed=True)
    assert abs(res.summary["counts"]["correct"] - before) == 1  # graded against the new gold
