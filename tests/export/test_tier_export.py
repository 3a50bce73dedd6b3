"""Exports carry the served tier (issue 45, item 1 follow-up): `--to csv|jsonl` and `RunResult.to_rows()` have a
`served_tier` column (the tier each reply said served the query, empty where it named none), priced per row at
that tier; the Every Eval Ever export names it on each instance line and the run's requested tier and answers per
tier in its aggregate; MLflow logs the requested tier as a parameter beside the other delivery settings and the
answers per tier as metrics. A priority run whose priority limit is half used up (the simulator serves every
second priority request at standard, as Gemini and OpenAI do over the limit) gives rows of both tiers. Driven
through `evalkit.run`, `evalkit.export.export` and `evalkit sim`'s public names: the file runs on 0.3.0."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from synthetic_data import colour_questions

from evalkit import run
from evalkit.export import export
from evalkit.sim import SimConfig, SimThread
from evalkit.sim.from_bench import answer_key_for

try:  # 0.3.0's simulator sells no tiers: there the runs themselves show what 0.3.0 does
    from evalkit.sim import SimTiers
except ImportError:
    SimTiers = None

N = 6
KEY = "sk-tier-export"
EEE = next(p / "fixtures" / "eee" for p in Path(__file__).resolve().parents if (p / "fixtures" / "eee").is_dir())
STANDARD = {"input": 1.0, "output": 4.0, "cached_input": 0.5}
PRIORITY = {"input": 2.5, "output": 9.0, "cached_input": 1.25}


@pytest.fixture
def asked(tmp_path: Path):
    """Ask the N questions of one data file, with or without a tier, each run at its own server and cache."""
    data = colour_questions(tmp_path / "ds", N)

    def ask(name: str, **kw):
        prices = tmp_path / f"prices-{name}.json"  # priority priced by the file (0.3.0's price file has no `tiers`)
        entry = {**STANDARD, "tiers": {"priority": PRIORITY}} if kw else STANDARD
        prices.write_text(json.dumps({"openai/my-model": entry}), encoding="utf-8")
        config = SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))
        if SimTiers is not None:
            config.tiers = SimTiers(priority_over=0.5)
        with SimThread(config) as sim:
            result = run("mcq", "openai/my-model", data=str(data), base_url=sim.url + "/v1",
                         env={"OPENAI_API_KEY": KEY}, out=str(tmp_path / name), cache_dir=str(tmp_path / "c" / name),
                         prices=str(prices), progress=False, plots=False, **kw)
        assert result.exit_code == 0, result.messages
        return result

    return ask


def _cost(usage: dict, rates: dict) -> float:
    cached = usage.get("cached_input_tokens") or 0
    return ((usage["input_tokens"] - cached) * rates["input"] + cached * rates["cached_input"]
            + usage["output_tokens"] * rates["output"]) / 1e6


def test_csv_jsonl_and_to_rows_carry_the_served_tier(asked, tmp_path):
    standard = export([asked("standard").out_dir], "csv", out=tmp_path / "standard.csv")[0]
    with open(standard, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == N and "served_tier" in rows[0], list(rows[0])
    assert {r["served_tier"] for r in rows} == {""}  # no tier asked, none named: an empty cell

    result = asked("priority", service_tier="priority")
    served = {r.query_id: r.served_tier for r in result.records}
    assert Counter(served.values()) == {"priority": N // 2, "standard": N // 2}
    assert result.summary["service_tier"] == {"requested": "priority", "served": {"priority": N // 2, "standard": N // 2}}
    usage = {r.query_id: r.usage for r in result.records}
    with open(export([result.out_dir], "csv", out=tmp_path / "priority.csv")[0], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["query_id"]: r["served_tier"] for r in rows} == served
    for r in rows:  # each row priced at the tier that served it
        rates = PRIORITY if r["served_tier"] == "priority" else STANDARD
        assert float(r["cost_usd"]) == pytest.approx(_cost(usage[r["query_id"]], rates), rel=1e-9)
    lines = [json.loads(x) for x in export([result.out_dir], "jsonl", out=tmp_path / "p.jsonl")[0].read_text().splitlines()]
    assert {x["query_id"]: x["served_tier"] for x in lines} == served
    assert {x["query_id"]: x["served_tier"] for x in result.to_rows()} == served


def test_eee_and_mlflow_carry_the_requested_tier_and_the_answers_per_tier(asked, tmp_path, monkeypatch,
                                                                             request):
    plain = json.loads(Path(export([asked("standard").out_dir], "eee", out=tmp_path / "eee-standard")[0])
                       .read_text(encoding="utf-8"))["source_metadata"]["additional_details"]
    assert "service_tier" not in plain  # a run that asked no tier: its export as before
    result = asked("priority", service_tier="priority")
    served = {r.query_id: r.served_tier for r in result.records}
    aggregate, instances = export([result.out_dir], "eee", out=tmp_path / "eee")
    lines = [json.loads(x) for x in Path(instances).read_text(encoding="utf-8").splitlines()]
    assert {x["sample_id"]: x["metadata"]["served_tier"] for x in lines} == served
    log = json.loads(Path(aggregate).read_text(encoding="utf-8"))
    for name, docs in (("eval.schema.json", [log]), ("instance_level_eval.schema.json", lines)):
        schema = json.loads((EEE / name).read_text(encoding="utf-8"))
        validator = jsonschema.validators.validator_for(schema)(schema)
        for doc in docs:  # still the schema's: the tier is in its free-text details
            validator.validate(doc)
    details = log["source_metadata"]["additional_details"]
    assert json.loads(details["service_tier"]) == {"requested": "priority",
                                                   "served": {"priority": N // 2, "standard": N // 2}}
    assert json.loads(details["settings"])["service_tier"] == "priority"

    mlflow = pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)  # mlflow keeps artifacts beside the store's working folder
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = request.getfixturevalue("mlflow_uri")  # a copy of the suite's empty store: no schema migrations here
    (run_id,) = export([result.out_dir], "mlflow", tracking_uri=uri, project="tiers")
    got = mlflow.MlflowClient(tracking_uri=uri).get_run(run_id).data
    assert got.params["service_tier"] == "priority"
    assert (got.metrics["service_tier/priority"], got.metrics["service_tier/standard"]) == (N // 2, N // 2)
