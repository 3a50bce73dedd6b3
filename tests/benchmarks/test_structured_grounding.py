"""`--structured` on TDBench grounding in robust mode against the simulator (issue 47, item 3): the boxes are
read from the structured answer (the JSON the simulator sent), a model that drifts from the format loses
no answer with it, the request key changes with the flag, and official mode refuses it in one line.

Only the public surface: `evalkit.run`, the `evalkit` command and `evalkit.sim`'s names (the same file runs on
0.3.0, where the flag is unknown)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import evalkit
from evalkit.sim import SimConfig, SimParams, SimThread
from evalkit.sim.from_bench import answer_key_for

KEY = {"OPENAI_API_KEY": "sk-structured-test"}


@pytest.fixture(scope="module")
def key():
    return answer_key_for("tdbench", {"data": "sample", "td_set": "grounding"})


def _run(sim: SimThread, out, **kw):
    return evalkit.run("tdbench", "openai/gpt-4o", base_url=sim.url + "/v1", env=KEY, data="sample", mode="robust",
                       td_set="grounding", out=str(out), no_cache=True, progress=False, plots=False, **kw)


def _records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def _unparsed_share(result) -> float:
    methods = result.summary["parse_methods"]
    return methods.get("unparsed", 0) / sum(methods.values())


def _numbers(box: str) -> list[float]:
    return [float(v) for v in box.strip("[]").split(",")]


def test_boxes_are_read_from_the_structured_answer_and_the_key_changes(key, tmp_path):
    with SimThread(SimConfig(answer_key=key)) as sim:
        on = _run(sim, tmp_path / "on", structured=True)
        off = _run(sim, tmp_path / "off")
        forms = [h.answer_form for h in sim.heard if h.path.endswith("/chat/completions")]
    assert on.exit_code == 0 and off.exit_code == 0, on.messages
    records = _records(tmp_path / "on")
    assert len(records) == 12  # the sample's 3 grounding items, 4 rotations each
    for r in records:
        sent = json.loads(r["response"])  # the simulator's JSON answer, as it came
        assert set(sent) == {"box"} and len(sent["box"]) == 4
        assert r["parse_method"] == "structured"
        assert _numbers(r["parsed"]) == pytest.approx(sent["box"], abs=1e-6)
        assert _numbers(r["parsed"]) == pytest.approx(_numbers(r["gold"]), abs=1e-6)  # the exact model: right
    # the body carried OpenAI's form: a json_schema response_format holding a four-number box, strict
    asked = [f for f in forms if f is not None]
    assert len(asked) == 12 and len(forms) == 24
    fmt = asked[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    box = fmt["json_schema"]["schema"]["properties"]["box"]
    assert box["type"] == "array" and box["minItems"] == box["maxItems"] == 4 and box["items"] == {"type": "number"}
    # the schema is in the request key: every query's key differs with the flag; without it, none is read so
    off_keys = {r["query_id"]: r["request_key"] for r in _records(tmp_path / "off")}
    assert all(off_keys[r["query_id"]] != r["request_key"] for r in records)
    assert {r["parse_method"] for r in _records(tmp_path / "off")} == {"rule"}
    # and the run says so
    assert on.summary["config"]["structured"] is True and "structured" not in off.summary["config"]
    assert on.summary["structured"] == {"queries": 12, "read": 12}
    report = (tmp_path / "on" / "report.md").read_text()
    assert "Structured outputs: on" in report and "Structured outputs" not in (tmp_path / "off" / "report.md").read_text()
    site = evalkit.build_view([str(tmp_path / "on")], out=str(tmp_path / "site")).parent
    meta = (site / "data" / "meta.js").read_text()
    assert '"structured":"on: 12 queries asked for a JSON answer in the benchmark\'s schema, 12 read from it"' in meta


def test_a_drifting_model_loses_no_box_with_the_flag(key, tmp_path):
    plan = evalkit.run("tdbench", "openai/gpt-4o", env=KEY, data="sample", mode="robust", td_set="grounding",
                       structured=True, dry_run=True, no_cache=True, progress=False)  # what the flag will send
    assert plan.summary["dry_run"]["to_send"] == 12 and plan.summary["config"]["structured"] is True
    with SimThread(SimConfig(answer_key=key, params=SimParams(drift=0.5))) as sim:
        on = _run(sim, tmp_path / "on", structured=True)
        off = _run(sim, tmp_path / "off")
    assert on.exit_code == 0 and off.exit_code == 0
    assert _unparsed_share(off) > 0.2  # half the replies are worded off the format: the rules cannot read them
    assert _unparsed_share(on) == 0.0 and on.summary["parse_methods"] == {"structured": 12}


def test_official_mode_refuses_the_flag_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "tdbench", "--model", "openai/gpt-4o",
                           "--data", "sample", "--structured", "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path, env={**KEY, "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--structured" in lines[0] and "--mode official" in lines[0], done.stderr
    assert not (tmp_path / "runs").exists()
