"""`--batch` with a stop rule (issue 46, item 3): waves of ⌈5 %⌉ of the run's groups, one batch each,
the rule asked between waves, and a continuation that submits only groups no wave asked.

Driven through `evalkit.run` against the simulator's batch API (OpenAI's wire): first with a StopRule
double at the engine's `stop_rule` hook that is done once k groups are answered (the interface the
engine documents), then with `--until-ci` itself."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from synthetic_data import tiny_mcq_set

import evalkit
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

ENV = {"OPENAI_API_KEY": "sk-test"}


N = 60  # items (each its own variant group): waves of ceil(5 % of 60) = 3 groups


class StopAfterGroups:
    """A StopRule that asks in the given order and is done once `k` groups have a record."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.groups: set[str] = set()
        self.seen: list[str] = []

    def order(self, queries: Sequence) -> list:
        return sorted(queries, key=lambda q: q.id, reverse=True)  # any fixed order: the last ids first

    def observe(self, record) -> None:
        self.groups.add(record.base_id)
        self.seen.append(record.query_id)

    def done(self) -> bool:
        return len(self.groups) >= self.k

    def block(self):
        return None


def _run(data: Path, sim: SimThread, out: Path, **kw):
    return evalkit.run("mcq", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=ENV, out=str(out),
                       progress=False, cache_dir=str(out.parent / "cache"), plots=False, batch=True, **kw)


def _batch_sizes(sim: SimThread) -> list[int]:
    return [len(b.lines) for b in sim.batches.batches.values()]


@pytest.fixture
def data(tmp_path):
    return tiny_mcq_set(tmp_path / "ds", N, 3)


def test_a_stop_rule_under_batch_submits_waves_and_stops_between_them(data, tmp_path):
    wave = math.ceil(0.05 * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        rule = StopAfterGroups(k=7)  # done after the third wave (3 + 3 + 3 >= 7)
        first = _run(data, sim, tmp_path / "run", stop_rule=lambda job: rule)
        assert _batch_sizes(sim) == [wave, wave, wave]  # one batch per wave, each of ceil(5 %) groups
        assert sim.counters.snapshot()["completions"] == 3 * wave
        recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
        asked = sorted(r["query_id"] for r in recs)
        # the rule's order: the last ids first, whole waves
        assert asked == sorted(f"q{i:05d}" for i in range(N - 3 * wave, N))
        assert sorted(rule.seen) == asked and first.summary["missing"] == N - 3 * wave

        # a continuation with a rule that wants more: only new groups, still in waves
        more = StopAfterGroups(k=13)
        _run(data, sim, tmp_path / "run", stop_rule=lambda job: more)
        assert _batch_sizes(sim) == [wave] * 5  # two more waves (9 answered -> 12 -> 15 >= 13)
        assert sim.batches.counts["lines"] == 5 * wave == sim.counters.snapshot()["completions"]
        recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
        assert len({r["query_id"] for r in recs}) == len(recs) == 5 * wave  # nothing asked twice

        # without a rule: the rest in one batch, as any batch run
        last = _run(data, sim, tmp_path / "run")
        assert last.exit_code == 0 and last.summary["missing"] == 0
        assert _batch_sizes(sim) == [wave] * 5 + [N - 5 * wave]
        assert sim.counters.snapshot()["completions"] == N


def test_no_wait_submits_one_wave_and_the_same_command_goes_on(data, tmp_path):
    wave = math.ceil(0.05 * N)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        sim.batches.behaviour.frozen = True
        first = _run(data, sim, tmp_path / "run", stop_rule=lambda job: StopAfterGroups(k=5), wait=False)
        assert first.exit_code == 1 and _batch_sizes(sim) == [wave]  # one wave submitted, none beyond it
        sim.batches.behaviour.frozen = False
        _run(data, sim, tmp_path / "run", stop_rule=lambda job: StopAfterGroups(k=5))
        assert _batch_sizes(sim) == [wave, wave]  # the first wave collected (not submitted again), one more
        assert sim.batches.counts["lines"] == 2 * wave


def _half_width_after(data: Path, right: dict[str, float], groups: int, width: float) -> float:
    """The --until-ci interval's half-width (points) once the first `groups` groups of the seeded order
    are answered: one sequence over the whole order, every prefix a simple random sample (docs/stopping.md)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from evalkit.engine.until.order import sample_order
    from evalkit.metrics.analysis.confseq import ConfSeq

    rows = [json.loads(x) for x in data.read_text().splitlines()]
    order = sample_order([SimpleNamespace(base_id=x["id"], category=x["category"]) for x in rows], 0)
    cs = ConfSeq(sizes={"": len(order.sequence)}, alpha=0.05)
    for g in order.sequence[:groups]:
        cs = replace(cs, target=width / 100).update("", right[g])
    lo, hi = cs.interval()
    return (hi - lo) / 2 * 100


def test_until_ci_under_batch_checks_its_interval_between_waves(tmp_path):
    from evalkit.sim.model import SimParams

    n, width = 400, 20.0
    wave = math.ceil(0.05 * n)
    data = tiny_mcq_set(tmp_path / "ds", n, 8)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.75, seed=2))) as sim:
        res = _run(data, sim, tmp_path / "run", until_ci=width)
        block = res.summary["sample"]
        sizes = _batch_sizes(sim)
        assert res.exit_code == 0 and res.summary["stopped"] == "sample"
        assert sizes == [wave] * len(sizes) and block["asked"] == block["items"] == wave * len(sizes) < n
        recs = {json.loads(x)["base_id"]: 1.0 if json.loads(x)["correct"] is True else 0.0
                for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()}
        # done after the last wave, and not after the one before: no wave more, none less
        assert block["half_width"] == pytest.approx(_half_width_after(data, recs, block["items"], width), abs=1e-6)
        assert block["half_width"] <= width < _half_width_after(data, recs, block["items"] - wave, width)

        # a smaller W continues in waves from there: only groups not asked before
        more = _run(data, sim, tmp_path / "run", until_ci=width / 2)
        sizes = _batch_sizes(sim)
        assert sizes == [wave] * len(sizes) and more.summary["sample"]["asked"] == wave * len(sizes)
        assert sim.batches.counts["lines"] == sim.counters.snapshot()["completions"] == wave * len(sizes)
