"""Anthropic's `content: []` (the model ended its turn without a single block) is the "empty" outcome,
asked again, and an error if it stays so; never a successful empty answer.

Before, the adapter read it as an answer of no text: live, the runner retried it as empty content and
then kept "" as the model's answer (scored wrong, never asked again); in a batch the line was an
answer too. A reply of Gemini's without candidates is no answer either (a classified error, retried).
A reply cut off by the token limit before any block stays final, as every cut-off is.
"""

from __future__ import annotations

import json

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import ProviderError
from evalkit.providers.anthropic.batch import anthropic_line_result
from evalkit.providers.anthropic.client import response_from_anthropic
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery.faults import SimFaults
from evalkit.sim.server import SimConfig, SimThread

USAGE = {"input_tokens": 120, "output_tokens": 2}


def _message(content: list, stop_reason: str) -> dict:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": USAGE}


def test_no_content_blocks_is_the_empty_outcome_live_and_in_a_batch():
    with pytest.raises(ProviderError) as empty:
        response_from_anthropic(_message([], "end_turn"))
    assert empty.value.kind == "empty" and empty.value.retryable
    assert "content: []" in empty.value.message
    cid, line = anthropic_line_result({"custom_id": "ek-1", "result": {"type": "succeeded", "message": _message([], "end_turn")}})
    assert cid == "ek-1" and line.error == "empty" and not line.ok
    cut = response_from_anthropic(_message([], "max_tokens"))  # a cut-off: the same request ends the same
    assert cut.ok and cut.text == "" and cut.finish_reason == "max_tokens"
    said = response_from_anthropic(_message([{"type": "text", "text": "B"}], "end_turn"))
    assert said.ok and said.text == "B"


def test_a_run_asks_again_and_records_an_error_not_an_empty_answer(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 2, seed=6)
    faults = SimFaults(rate=1.0, kinds=("empty",))  # the simulator's Anthropic empty reply is `content: []`
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}), faults=faults)) as sim:
        run = run_main(["run", "mcq", "--model", "anthropic/sim-model", "--base-url", sim.url, "--data", str(data),
                       "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
                       "--max-attempts", "3"], env={"ANTHROPIC_API_KEY": "sk-ant-test"})
        requests = sim.counters.snapshot()["requests"]
    assert run.returncode == 1, run.stdout + run.stderr
    assert requests == 2 * 3  # each query asked three times
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert [(r["error"], r["response"]) for r in records] == [("empty", None), ("empty", None)]
