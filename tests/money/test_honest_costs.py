"""Costs told honestly (issue 44, item 3): `evalkit report` leaves a run's cost as it was, and a run answered
from the cache says what it paid (nothing) and what its answers cost at list price (the first run's cost)
on the console, in report.md, compare, the matrix, the viewer and every export.

Driven through the `evalkit` command, `evalkit.compare`, `evalkit.build_view` and `evalkit.export.export`
against the simulator, with a price file of our own (so the expected dollars are computed here, from the
records' tokens, not read from evalkit's table). One first run (and its cache) is made per module and
copied by each test that starts from it (`first_run`). The last test reads a run directory 0.3.0 wrote
(tests/fixtures/v03): its summary has no list cost, and compare and export compute one from its records.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from cli_under_test import run_cli

import evalkit
from evalkit.export import export
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread

IN_PER_M, OUT_PER_M = 3.0, 12.0  # our price for openai/gpt-4o (and gpt-4o-mini), USD per million tokens
ENV = {"OPENAI_API_KEY": "sk-test-costs"}


@pytest.fixture(scope="module")
def sim():
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {}))) as server:
        yield server


@pytest.fixture(scope="module")
def prices(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prices") / "prices.json"
    entry = {"input": IN_PER_M, "output": OUT_PER_M}
    path.write_text(json.dumps({"openai/gpt-4o": entry, "openai/gpt-4o-mini": entry}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def first_made(sim, prices, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The module's one first run of GPT-4o on the sample (run directory, cache), every answer paid for."""
    folder = tmp_path_factory.mktemp("first")
    _run(sim, prices, folder / "cache", "--out", str(folder / "first"))
    return folder / "first", folder / "cache"


@pytest.fixture
def first_run(first_made, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the first run and its cache in the test's folder (tmp_path/first, tmp_path/cache)."""
    run_dir, cache = first_made
    shutil.copytree(run_dir, tmp_path / "first")
    shutil.copytree(cache, tmp_path / "cache")
    return tmp_path / "first", tmp_path / "cache"


def _run(sim: SimThread, prices: Path, cache: Path, *args: str, model: tuple[str, ...] = ("openai/gpt-4o",),
         cwd: Path | None = None):
    argv = ["run", "mcq", *[x for m in model for x in ("--model", m)], "--cache-dir", str(cache),
            "--prices", str(prices), "--no-progress", *args]
    done = run_cli(argv, env={**ENV, "OPENAI_BASE_URL": sim.url + "/v1"}, cwd=cwd)  # every model's server
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _at_our_price(records: list[dict]) -> float:
    """Every answer's tokens at our price, cached or not."""
    return sum(r["usage"]["input_tokens"] * IN_PER_M + r["usage"]["output_tokens"] * OUT_PER_M
               for r in records if r["error"] is None) / 1e6


def _shown(paid: float, listed: float) -> str:
    """The documented display: four decimals below a dollar, "$0.00" for nothing."""
    return f"{'$0.00' if paid == 0 else f'${paid:.4f}'} paid · ${listed:.4f} list"


def test_report_after_a_run_leaves_its_cost_as_it_was(first_run):
    out, _ = first_run
    before = _summary(out)
    cost = _at_our_price(_records(out))
    assert cost > 0 and before["usage"]["cost_usd"] == pytest.approx(cost)

    report = run_cli(["report", str(out)], env=ENV)  # what the run's own hint recommends
    assert report.returncode == 0, report.stdout + report.stderr
    after = _summary(out)
    assert after["usage"]["cost_usd"] == pytest.approx(before["usage"]["cost_usd"])  # 0.3.0: None
    assert after["usage"]["list_cost_usd"] == pytest.approx(cost)
    assert after["this_run"] == before["this_run"]  # a report asks the model nothing: what the run paid stands
    assert after["this_run"]["cost_usd"] == pytest.approx(cost)
    line = _shown(cost, cost)
    assert line in (out / "report.md").read_text(encoding="utf-8")
    assert line in report.stdout


def test_a_run_answered_from_the_cache_pays_nothing_and_lists_the_first_runs_cost(sim, prices, first_run, tmp_path):
    (first, cache), cached = first_run, tmp_path / "cached"
    paid_first = _summary(first)["usage"]["cost_usd"]
    assert paid_first == pytest.approx(_at_our_price(_records(first))) and paid_first > 0
    requests = sim.counters.snapshot()["requests"]

    again = _run(sim, prices, cache, "--out", str(cached))
    assert sim.counters.snapshot()["requests"] == requests  # every answer from the cache
    s = _summary(cached)
    assert s["usage"]["cost_usd"] == 0  # 0.3's meaning kept: what its answers cost when asked
    assert s["usage"]["list_cost_usd"] == pytest.approx(paid_first)  # 0.3.0: no list cost at all
    assert s["this_run"]["cost_usd"] == 0  # what this invocation sent
    line = _shown(0, paid_first)
    assert line in again.stdout
    assert line in (cached / "report.md").read_text(encoding="utf-8")

    board = tmp_path / "compare"
    evalkit.compare([first, cached], out=board, plots=False)
    models = {Path(m["run_dir"]).name: m for m in json.loads((board / "comparison.json").read_text())["models"]}
    assert models["cached"]["paid_usd"] == 0 and models["first"]["paid_usd"] == pytest.approx(paid_first)
    assert models["cached"]["usage"]["list_cost_usd"] == pytest.approx(paid_first)
    compared = (board / "report.md").read_text(encoding="utf-8")
    assert line in compared and _shown(paid_first, paid_first) in compared

    rows_file = tmp_path / "rows.csv"
    export([cached], "csv", out=rows_file)
    with rows_file.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sum(float(r["cost_usd"]) for r in rows) == 0
    assert sum(float(r["list_cost_usd"]) for r in rows) == pytest.approx(paid_first)

    eee = tmp_path / "eee"
    export([cached], "eee", out=eee)
    (aggregate,) = [p for p in eee.rglob("*.json") if "instances" not in p.name]
    details = json.loads(aggregate.read_text(encoding="utf-8"))["source_metadata"]["additional_details"]
    assert json.loads(details["usage"])["list_cost_usd"] == pytest.approx(paid_first)
    assert details["cost"] == line

    site = evalkit.build_view([first, cached], out=tmp_path / "site")
    page = (site.parent / "data" / "meta.js").read_text(encoding="utf-8")
    assert line in page and _shown(paid_first, paid_first) in page


def test_a_matrix_of_cached_answers_says_paid_and_list(sim, prices, first_run, tmp_path):
    _, cache = first_run
    listed = _summary(tmp_path / "first")["usage"]["cost_usd"]
    done = _run(sim, prices, cache, "--out", str(tmp_path / "m"),
                model=("openai/gpt-4o", "openai/gpt-4o-mini"), cwd=tmp_path)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("mcq · openai/gpt-4o: ") and " answered" in x]
    assert _shown(0, listed) in line  # 0.3.0: "$0.0000", as if GPT-4o cost nothing
    (costs,) = [x for x in done.stdout.splitlines() if x.startswith("cost: ")]  # under the comparison's table
    assert f"openai/gpt-4o {_shown(0, listed)}" in costs


def test_batch_answers_are_listed_at_the_batch_price_with_the_standard_price_beside(sim, prices, tmp_path):
    cache, batched, cached = tmp_path / "cache", tmp_path / "batched", tmp_path / "cached"
    _run(sim, prices, cache, "--out", str(batched), "--batch")
    records = _records(batched)
    assert {r["via"] for r in records} == {"batch"}
    standard = _at_our_price(records)
    listed = standard / 2  # OpenAI's batch discount on every rate (no batch rates in our price file)
    s = _summary(batched)
    assert s["usage"]["cost_usd"] == pytest.approx(listed) and s["usage"]["list_cost_usd"] == pytest.approx(listed)
    assert s["usage"]["list_cost_standard_usd"] == pytest.approx(standard)
    assert s["this_run"]["cost_usd"] == pytest.approx(listed)

    again = _run(sim, prices, cache, "--out", str(cached))  # live, every answer from the batch's cache entries
    s = _summary(cached)
    assert s["usage"]["cost_usd"] == 0
    assert s["usage"]["list_cost_usd"] == pytest.approx(listed)  # the delivery that served them: batch
    assert s["usage"]["list_cost_standard_usd"] == pytest.approx(standard) and s["this_run"]["cost_usd"] == 0
    assert f"{_shown(0, listed)} (${standard:.4f} at the standard price)" in again.stdout


def test_mlflow_logs_paid_and_list(sim, prices, first_run, mlflow_uri, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    (first, cache), cached = first_run, tmp_path / "cached"
    _run(sim, prices, cache, "--out", str(cached))
    listed = _summary(first)["usage"]["cost_usd"]
    monkeypatch.chdir(tmp_path)  # mlflow keeps artifacts beside the store's working folder (./mlruns)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = mlflow_uri  # a fresh store (a copy of an empty one)
    (run_id,) = export([cached], "mlflow", tracking_uri=uri, project="costs")
    metrics = mlflow.MlflowClient(tracking_uri=uri).get_run(run_id).data.metrics
    assert metrics["cost/paid_usd"] == 0 and metrics["cost/list_usd"] == pytest.approx(listed)
    assert metrics["usage/list_cost_usd"] == pytest.approx(listed) and metrics["usage/cost_usd"] == 0


def _v03_run() -> Path:
    """The run directory 0.3.0 wrote (tests/fixtures/v03): TDBench against the simulator, 120 answers."""
    for folder in Path(__file__).resolve().parents:
        found = sorted(folder.glob("*fixtures/v03/tdbench-v03/runs/*/summary.json"))
        if found:
            return found[0].parent
    pytest.skip("the 0.3.0 fixture is not beside this checkout's tests")


def _priced_copy(run_dir: Path, to: Path, cost: float) -> Path:
    """A copy of the 0.3.0 run as 0.3.0 writes it for a priced model: the price in config.json and the
    summary's config, the summary's cost_usd computed at it; no list cost (0.3.0 has none)."""
    shutil.copytree(run_dir, to)
    price = {"input_per_m": IN_PER_M, "output_per_m": OUT_PER_M, "cached_input_per_m": None, "source": "test",
             "read_on": "today", "provider": "openai", "note": ""}
    config = json.loads((to / "config.json").read_text(encoding="utf-8"))
    config["config"]["price"] = price
    (to / "config.json").write_text(json.dumps(config), encoding="utf-8")
    summary = _summary(to)
    assert "list_cost_usd" not in summary["usage"] and "cost_usd" not in summary["this_run"]  # 0.3's shape
    summary["config"]["price"] = price
    summary["usage"]["cost_usd"] = cost
    (to / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return to


def test_a_03_summary_gets_its_list_cost_from_its_records(tmp_path):
    v03 = _v03_run()
    cost = _at_our_price(_records(v03))
    assert cost > 0
    a, b = _priced_copy(v03, tmp_path / "a", cost), _priced_copy(v03, tmp_path / "b", cost)

    board = tmp_path / "compare"
    evalkit.compare([a, b], out=board, plots=False)
    models = json.loads((board / "comparison.json").read_text(encoding="utf-8"))["models"]
    assert [m["usage"]["list_cost_usd"] for m in models] == pytest.approx([cost, cost])
    assert [m["paid_usd"] for m in models] == pytest.approx([cost, cost])  # it sent all 120: paid = its cost_usd
    assert _shown(cost, cost) in (board / "report.md").read_text(encoding="utf-8")

    rows_file = tmp_path / "rows.jsonl"
    export([a], "jsonl", out=rows_file)
    rows = [json.loads(x) for x in rows_file.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 120 and sum(r["list_cost_usd"] for r in rows) == pytest.approx(cost)
    assert _summary(a)["usage"].get("list_cost_usd") is None  # read, never rewritten
