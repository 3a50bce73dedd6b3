"""`--structured` through each provider dialect the simulator speaks (issue 47, item 3): an MCQ run in robust
mode whose request bodies carry the provider's own form (OpenAI's json_schema response_format, Gemini's
responseMimeType and responseSchema, Anthropic's structured outputs (`output_config.format`) for the Claude
models that have them and a forced tool for the others, Bedrock Converse's toolConfig), whose answers are read
from the structured reply; a Claude model with structured outputs answers with thinking on too, and a Claude
model asked with a forced tool refuses thinking in one line before any request.

Only the public surface (`evalkit.run`, `evalkit.sim`), so the same file runs on 0.3.0, where the flag is unknown."""

from __future__ import annotations

import json

import pytest

import evalkit
from evalkit.core.errors import EvalkitError
from evalkit.sim import SimConfig, SimThread
from evalkit.sim.from_bench import answer_key_for

LIMIT = 4
AWS = {"AWS_ACCESS_KEY_ID": "AKIASTRUCTUREDTEST01", "AWS_SECRET_ACCESS_KEY": "structured-test-secret",
       "AWS_REGION": "us-east-1"}
# model, (run() keywords, environment) given the simulator's URL, and the route its answers come on
CASES = {
    "openai": ("openai/gpt-4o", lambda url: ({"base_url": url + "/v1"}, {"OPENAI_API_KEY": "sk-structured"})),
    "vllm": ("vllm/sim-model", lambda url: ({"base_url": url + "/v1"}, {})),
    "azure": ("azure/my-gpt4o", lambda url: ({}, {"AZURE_OPENAI_API_KEY": "structured", "AZURE_OPENAI_ENDPOINT": url})),
    "anthropic": ("anthropic/claude-3-5-haiku-20241022",
                  lambda url: ({}, {"ANTHROPIC_API_KEY": "sk-ant-structured", "ANTHROPIC_BASE_URL": url})),
    "anthropic-json": ("anthropic/claude-sonnet-4-6",
                       lambda url: ({}, {"ANTHROPIC_API_KEY": "sk-ant-structured", "ANTHROPIC_BASE_URL": url})),
    "google": ("google/gemini-2.5-flash", lambda url: ({}, {"GEMINI_API_KEY": "structured", "GEMINI_BASE_URL": url})),
    "bedrock": ("bedrock/us.amazon.nova-lite-v1:0", lambda url: ({"base_url": url}, dict(AWS))),
    "bedrock-claude": ("bedrock/us.anthropic.claude-3-5-haiku-20241022-v1:0", lambda url: ({"base_url": url}, dict(AWS))),
    "bedrock-claude-json": ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                            lambda url: ({"base_url": url}, dict(AWS))),
}


@pytest.fixture(scope="module")
def sim():
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"limit": LIMIT}))) as server:
        yield server


def _letters_schema(schema: dict) -> list[str]:
    assert schema["required"] == ["answer"]
    answer = schema["properties"]["answer"]
    assert str(answer["type"]).lower() == "string"
    return answer["enum"]


def _schema_sent(case: str, form: dict) -> dict:
    """The schema a body carried, checked to be in the provider's own form."""
    if case in ("openai", "vllm", "azure"):
        fmt = form["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True and fmt["json_schema"]["name"]
        assert set(form) == {"response_format"}
        return fmt["json_schema"]["schema"]
    if case == "google":
        assert form["responseMimeType"] == "application/json" and form["responseSchema"]["type"] == "OBJECT"
        assert "additionalProperties" not in form["responseSchema"]  # not in Gemini's Schema subset
        return form["responseSchema"]
    if case in ("anthropic-json", "bedrock-claude-json"):  # structured outputs: no tool, the JSON comes as text
        assert set(form) == {"output_config"}
        fmt = form["output_config"]["format"]
        assert set(fmt) == {"type", "schema"} and fmt["type"] == "json_schema"
        return fmt["schema"]
    if case in ("anthropic", "bedrock-claude"):
        (tool,) = form["tools"]
        assert form["tool_choice"] == {"type": "tool", "name": tool["name"]}
        return tool["input_schema"]
    config = form["toolConfig"]
    (tool,) = config["tools"]
    assert config["toolChoice"] == {"tool": {"name": tool["toolSpec"]["name"]}}
    return tool["toolSpec"]["inputSchema"]["json"]


@pytest.mark.parametrize("case", list(CASES))
def test_each_provider_sends_its_own_form_and_the_answers_are_read(case, sim, tmp_path):
    model, pointed = CASES[case]
    kw, env = pointed(sim.url)
    before = len(sim.heard)
    done = evalkit.run("mcq", model, env=env, limit=LIMIT, mode="robust", structured=True, out=str(tmp_path / "run"),
                       no_cache=True, progress=False, plots=False, **kw)
    assert done.exit_code == 0, done.messages
    asked = [h for h in sim.heard[before:] if h.method == "POST" and h.answer_form is not None]
    assert len(asked) == LIMIT
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    for h in asked:
        letters = _letters_schema(_schema_sent(case, h.answer_form))
        assert letters and all(len(x) == 1 for x in letters)
    for r in records:  # the reply was the JSON answer (a tool's input, JSON-encoded, for Anthropic and Bedrock)
        assert json.loads(r["response"]) == {"answer": r["parsed"]}
        assert r["parse_method"] == "structured" and r["correct"] is True
    assert done.summary["structured"] == {"queries": LIMIT, "read": LIMIT}


THINKING = [{"reasoning_effort": "low"}, {"thinking_budget": 2048},
            {"extra": {"thinking": {"type": "enabled", "budget_tokens": 2048}}}]


THINK = 300  # the simulated model thinks uniform [THINK/2, 3*THINK/2] tokens, only when the body asks it to


@pytest.fixture(scope="module")
def thinking_sim():
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"limit": LIMIT}), think_tokens=THINK)) as server:
        yield server


@pytest.mark.parametrize("thinking", THINKING)
def test_claude_with_structured_outputs_answers_with_thinking_on(thinking, thinking_sim, tmp_path):
    sim = thinking_sim
    before = len(sim.heard)
    done = evalkit.run("mcq", "anthropic/claude-sonnet-4-6", env={"ANTHROPIC_API_KEY": "x", "ANTHROPIC_BASE_URL": sim.url},
                       limit=LIMIT, mode="robust", structured=True, out=str(tmp_path / "run"), no_cache=True,
                       progress=False, plots=False, **thinking)
    assert done.exit_code == 0, done.messages
    asked = [h for h in sim.heard[before:] if h.method == "POST"]
    assert len(asked) == LIMIT
    for h in asked:  # the schema as output_config.format, and no forced tool (which the API refuses with thinking)
        assert set(h.answer_form) == {"output_config"}
        assert _letters_schema(h.answer_form["output_config"]["format"]["schema"])
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(records) == LIMIT
    for r in records:  # the JSON answer is a few tokens: the rest of the output is the thinking the body asked for
        assert r["usage"]["output_tokens"] >= THINK // 2
        assert json.loads(r["response"]) == {"answer": r["parsed"]}
        assert r["parse_method"] == "structured" and r["correct"] is True
    assert done.summary["structured"] == {"queries": LIMIT, "read": LIMIT}


@pytest.mark.parametrize("thinking", THINKING)
def test_claude_with_a_forced_tool_and_thinking_refuses_the_flag_in_one_line(thinking, sim, tmp_path):
    before = len(sim.heard)
    with pytest.raises(EvalkitError) as caught:
        evalkit.run("mcq", "anthropic/claude-3-5-haiku-20241022", env={"ANTHROPIC_API_KEY": "x", "ANTHROPIC_BASE_URL": sim.url},
                    limit=LIMIT, mode="robust", structured=True, out=str(tmp_path / "run"), no_cache=True,
                    progress=False, plots=False, **thinking)
    message = str(caught.value)
    assert "\n" not in message and "--structured" in message and "thinking" in message
    assert len(sim.heard) == before and not (tmp_path / "run").exists()
