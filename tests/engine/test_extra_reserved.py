"""`--extra` adds request fields; it cannot change which model answers or what it is asked."""

from __future__ import annotations

import json

import pytest
from synthetic_data import make_mcq_jsonl

from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


@pytest.mark.parametrize("key", ["model", "messages", "contents", "system", "system_instruction", "stream"])
def test_reserved_keys_are_refused_before_anything_is_sent_or_written(tmp_path, capsys, key):
    data = make_mcq_jsonl(tmp_path / "ds", 3)
    extra = json.dumps({key: "x", "guided_choice": ["A", "B"]})
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        code = main(["run", "mcq", "--model", "vllm/sim-model", "--base-url", sim.url, "--data", str(data),
                     "--out", str(tmp_path / "run"), "--extra", extra, "--no-progress"])
        with pytest.raises(EvalkitError, match=f"--extra cannot set '{key}'"):
            run("mcq", "vllm/sim-model", base_url=sim.url, data=str(data), out=str(tmp_path / "run2"),
                extra=extra, progress=False)
        requests = sim.counters.snapshot()["requests"]
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"--extra cannot set '{key}'" in err and "\n" not in err
    assert requests == 0 and not (tmp_path / "run").exists() and not (tmp_path / "run2").exists()


def test_other_fields_pass_through(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 3)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        res = run("mcq", "vllm/sim-model", base_url=sim.url, data=str(data), out=str(tmp_path / "run"),
                  extra='{"guided_choice": ["A", "B", "C", "D"], "top_k": 5}', progress=False, no_cache=True)
    assert res.exit_code == 0 and res.summary["config"]["generation"]["extra"] == {
        "guided_choice": ["A", "B", "C", "D"], "top_k": 5}
