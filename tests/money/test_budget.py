"""`--max-cost` that holds: the run directory's budget across resumes, reservations before each request,
the dry run's spent and left (evalkit.money.budget, evalkit.money.spending, evalkit.engine.budgeting)."""

from __future__ import annotations

import asyncio

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.core.types import Query, Response, Usage
from evalkit.engine.evaluate import run
from evalkit.money.budget import Budget
from evalkit.money.costs import records_cost
from evalkit.money.pricing import Price
from evalkit.money.spending import Spending
from evalkit.rundir.records import read_records
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

KEYS = {"OPENAI_API_KEY": "sk-test"}
PRICE = Price(2.0, 8.0, 0.5, "test", "today", "openai")


def test_a_reservation_that_would_pass_the_cap_is_refused_and_settling_replaces_it():
    b = Budget(1.0, spent=0.25)
    first = b.reserve(0.5)
    assert first is not None and b.reserved == 0.5 and b.left == 0.25
    assert b.reserve(0.3) is None and b.reserved == 0.5  # refused: nothing changes
    b.settle(first, 0.1)
    assert b.spent == pytest.approx(0.35) and b.reserved == 0.0 and b.left == pytest.approx(0.65)
    assert b.reserve(0.65) is not None  # exactly the cap fits


class _Cheap:
    """A send whose answer costs `actual` and comes back when the test lets it."""

    def __init__(self) -> None:
        self.started = 0
        self.go = asyncio.Event()

    async def __call__(self) -> Response:
        self.started += 1
        await self.go.wait()
        return Response(text="A", usage=Usage(cost_usd=0.01))


def test_a_request_that_does_not_fit_waits_for_those_in_flight_then_the_run_stops():
    async def main() -> tuple[int, int, Spending]:
        spending = Spending(Budget(0.1), None, "openrouter", largest=0.04)  # no price: the largest cost seen
        send = _Cheap()
        q = Query("q", "q", "q", {}, (), "A")
        tasks = [asyncio.ensure_future(spending.send(send, q, [])) for _ in range(8)]
        await asyncio.sleep(0)
        in_flight = send.started  # 0.04 each: two fit under 0.1, the others wait for room
        send.go.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        return in_flight, sum(isinstance(r, Response) for r in results), spending

    in_flight, answered, spending = asyncio.run(main())
    assert in_flight == 2
    # each answer cost 0.01 but the largest seen was 0.04: reservations of 0.04 fit while 0.1 - spent >= 0.04
    assert spending.exhausted and spending.ledger.spent <= 0.1 + 1e-12
    assert answered == round(spending.ledger.spent / 0.01) and answered >= 6


def _run(data, sim, out, prices, **kw):
    return run("mcq", "openai/sim-model", data=str(data), base_url=sim.url + "/v1", env=KEYS, out=str(out),
               no_cache=True, progress=False, prices=str(prices), plots=False, max_tokens=16, **kw)


def _spent(out) -> float:
    return records_cost(PRICE, read_records(out / "records.jsonl").records.values())


class _Abort(Exception):
    pass


def _abort_after(n: int):
    seen = []

    def on_record() -> None:
        seen.append(1)
        if len(seen) == n:
            raise _Abort

    return on_record


def test_max_cost_across_two_resumes_stays_within_one_request_of_the_cap(tmp_path, prices):
    data = make_mcq_jsonl(tmp_path / "ds", 80, seed=11)
    key = answer_key_for("mcq", {"data": str(data)})
    out = tmp_path / "r"
    with SimThread(SimConfig(answer_key=key)) as sim:
        probe = _run(data, sim, tmp_path / "probe", prices, limit=1)
        one = probe.summary["usage"]["cost_usd"]  # one request's cost; its estimate is a little more
        cap = 30.5 * one
        for _ in range(2):  # two invocations interrupted after 10 answers each: what they spent counts
            with pytest.raises(_Abort):
                _run(data, sim, out, prices, max_cost=cap, concurrency=4, on_record=_abort_after(10))
        spent_before = _spent(out)
        last = _run(data, sim, out, prices, max_cost=cap, concurrency=4)
        again = _run(data, sim, out, prices, max_cost=cap, concurrency=4)
        dry = _run(data, sim, out, prices, max_cost=cap, dry_run=True)
    total = _spent(out)
    assert spent_before >= 19 * one  # the interrupted invocations kept their answers
    assert cap - 2 * one <= total <= cap  # within one request (and its estimate's margin) of the cap
    assert last.exit_code == 1 and last.summary["stopped"] == "max_cost"
    assert f"of ${cap:.4f} in this run directory (this invocation $" in last.messages[-1]
    assert last.summary["budget"]["spent_usd"] == pytest.approx(total)
    assert last.summary["budget"]["earlier_usd"] == pytest.approx(spent_before)
    assert again.exit_code == 1 and again.summary["budget"]["this_invocation_usd"] <= one * 1.01
    plan = dry.summary["dry_run"]
    assert plan["spent_usd"] == pytest.approx(total) and plan["budget_left_usd"] == pytest.approx(cap - total)


def test_32_in_flight_do_not_overshoot_the_cap(tmp_path, prices):
    data = make_mcq_jsonl(tmp_path / "ds", 200, seed=12)
    key = answer_key_for("mcq", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, latency_s=0.05)) as sim:  # 32 in flight at once
        one = _run(data, sim, tmp_path / "probe", prices, limit=1).summary["usage"]["cost_usd"]
        cap = 40.5 * one  # about one round of 32 in flight: before, all 32 passed a nearly spent cap
        res = _run(data, sim, tmp_path / "r", prices, max_cost=cap, concurrency=32)
    total = _spent(tmp_path / "r")
    assert res.exit_code == 1 and res.summary["stopped"] == "max_cost"
    assert cap - 2 * one <= total <= cap


def test_shared_budget_needs_a_cache_url_and_a_cap(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=6)
    with pytest.raises(EvalkitError, match="--shared-budget needs --cache-url"):
        run("mcq", "openai/sim-model", data=str(data), base_url="http://127.0.0.1:9/v1", env=KEYS, max_cost=1.0,
            shared_budget="team", out=str(tmp_path / "r"), progress=False)
    with pytest.raises(EvalkitError, match="--shared-budget needs --max-cost"):
        run("mcq", "openai/sim-model", data=str(data), base_url="http://127.0.0.1:9/v1", env=KEYS,
            shared_budget="team", cache_url="redis://127.0.0.1:9/0", out=str(tmp_path / "r"), progress=False)
