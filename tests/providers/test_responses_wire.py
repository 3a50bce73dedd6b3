"""The Responses API's request and reply mapping (issue 47, item 1) and its place in the request key
(item 2): what is sent for a question, each reply outcome read exactly as its Chat Completions twin, the
route's default per model, and a chat key that does not move."""

from __future__ import annotations

from typing import Any

import pytest

from evalkit.ask.request_key import request_key
from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, TextPart
from evalkit.providers.api_route import api_setting, default_timeout, route_for, route_hint
from evalkit.providers.openai.format import response_from_openai
from evalkit.providers.openai.responses import response_from_responses, responses_body

MESSAGES = (Message("system", (TextPart("Answer with a letter."),)),
            Message("user", (ImagePart(ImageRef("path", "a.png")), TextPart("Which colour? A. red B. blue"))))


def _chat(content: Any, finish: str = "stop", refusal: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        msg["refusal"] = refusal
    return {"model": "o3-pro-2025-06-10", "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 64},
                      "completion_tokens_details": {"reasoning_tokens": 30}}}


def _resp(parts: list[dict[str, Any]] | None, status: str = "completed", reason: str | None = None) -> dict[str, Any]:
    output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    if parts is not None:
        output.append({"type": "message", "id": "msg_1", "role": "assistant", "content": parts})
    return {"object": "response", "model": "o3-pro-2025-06-10", "status": status, "output": output,
            "incomplete_details": {"reason": reason} if reason else None,
            "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 40,
                      "output_tokens_details": {"reasoning_tokens": 30}}}


def _outcome(read: Any, reply: dict[str, Any]) -> tuple:
    try:
        r = read(reply)
    except ProviderError as e:
        return ("error", e.kind, e.message)
    return (r.text, r.finish_reason, r.usage, r.served_by, r.reasoning)


@pytest.mark.parametrize(("chat", "responses"), [
    (_chat("B"), _resp([{"type": "output_text", "text": "B", "annotations": []}])),
    (_chat("The ans", "length"), _resp([{"type": "output_text", "text": "The ans"}], "incomplete", "max_output_tokens")),
    (_chat("", "length"), _resp(None, "incomplete", "max_output_tokens")),  # cut off while reasoning
    (_chat("", "content_filter"), _resp(None, "incomplete", "content_filter")),
    (_chat("", refusal="I can't help with that."),
     _resp([{"type": "refusal", "refusal": "I can't help with that."}])),
    (_chat(None), _resp([])),  # a message with no text: an empty answer, as chat's null content
])
def test_each_reply_outcome_is_read_exactly_as_its_chat_completions_twin(chat, responses):
    assert _outcome(response_from_responses, responses) == _outcome(response_from_openai, chat)


def test_a_reply_without_any_message_or_a_failed_one_is_a_transient_error():
    with pytest.raises(ProviderError, match="malformed reply: no message in output") as no_message:
        response_from_responses(_resp(None))
    with pytest.raises(ProviderError, match="response failed: server overloaded") as failed:
        response_from_responses({**_resp(None), "status": "failed", "error": {"message": "server overloaded"}})
    assert no_message.value.kind == failed.value.kind == "transient"


def test_the_request_body():
    params = GenParams(max_tokens=300, temperature=0.0, seed=5, stop=("\n",), detail="low", api="responses",
                       extra=(("reasoning", {"summary": "auto"}),))
    body = responses_body("o3-pro", MESSAGES, ["data:image/png;base64,AAAA"], params, send_temperature=False,
                          reasoning={"reasoning_effort": "high"})
    assert body == {
        "model": "o3-pro", "instructions": "Answer with a letter.", "max_output_tokens": 300, "store": False,
        "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            {"type": "input_text", "text": "Which colour? A. red B. blue"}]}],
        "reasoning": {"effort": "high", "summary": "auto"}}  # no seed, no stop, no temperature (o-series)
    stopped = response_from_responses(_resp([{"type": "output_text", "text": "B\nbecause"}]), stop=["\n"])
    assert stopped.text == "B"


def test_the_route_per_model_and_what_enters_the_key():
    assert [route_for("openai", m, None) for m in ("o3-pro", "o3-pro-2025-06-10", "o1-pro", "gpt-5-pro",
                                                   "gpt-5.2-pro", "gpt-4o", "o3", "gpt-5")] == \
        ["responses"] * 5 + ["chat"] * 3
    assert route_for("azure", "o3-pro", None) == "responses" and route_for("openai-compatible", "o3-pro", None) == "chat"
    assert api_setting("openai", "gpt-4o", "chat") is None and api_setting("openai", "gpt-4o", "responses") == "responses"
    assert default_timeout("openai", "o3-pro", "responses") == 900.0 and default_timeout("openai", "gpt-4o", "responses") is None
    with pytest.raises(EvalkitError, match="--api responses is for openai/, openai-compatible/, azure/ models, not "
                                           "--model anthropic/claude-sonnet-4-5"):
        route_for("anthropic", "claude-sonnet-4-5", "responses")
    assert route_hint("HTTP 404: This model is only supported in v1/responses and not in v1/chat/completions.") \
        .endswith("run it with --api responses")

    def key(params: GenParams) -> str:
        return request_key(provider="openai", model="gpt-4o", endpoint="", params=params, messages=MESSAGES,
                           source_hash=lambda ref: "f" * 64)

    chat = key(GenParams())
    assert chat == key(GenParams(api=None)) and "api" not in GenParams().to_dict()
    assert key(GenParams(api="responses")) != chat and GenParams(api="responses").to_dict()["api"] == "responses"


def test_the_simulator_counts_a_responses_request_as_its_chat_twin(tmp_path):
    """The same question and image at `detail: low` on both routes: the same input tokens, the detail heard."""
    import base64
    import io

    openai = pytest.importorskip("openai")
    from PIL import Image

    from evalkit.sim import SimConfig, SimThread

    buf = io.BytesIO()
    Image.new("RGB", (1200, 900), (10, 120, 200)).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    with SimThread(SimConfig()) as sim:
        client = openai.OpenAI(base_url=sim.url + "/v1", api_key="k", max_retries=0)
        chat = client.chat.completions.create(model="gpt-4o", max_completion_tokens=50, messages=[
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                                         {"type": "text", "text": "Which colour?"}]}])
        resp = client.responses.create(model="gpt-4o", max_output_tokens=50, store=False, input=[
            {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "low"},
                                         {"type": "input_text", "text": "Which colour?"}]}])
        heard = [h.image_detail for h in sim.heard if h.method == "POST"]
    assert resp.usage.input_tokens == chat.usage.prompt_tokens > 85  # 85: a low-detail image on gpt-4o
    assert resp.output_text == chat.choices[0].message.content
    assert heard == [("low",), ("low",)]


def test_a_batch_line_refused_on_chat_for_a_responses_only_model_names_the_flag():
    from evalkit.providers.openai.batch import openai_line_result

    cid, answer = openai_line_result({"custom_id": "q1", "response": {"status_code": 404, "body": {"error": {
        "message": "This model is only supported in v1/responses and not in v1/chat/completions."}}}})
    assert cid == "q1" and answer.error == "permanent"
    assert answer.error_message.endswith("run it with --api responses")


def test_structured_answers_go_as_text_format_on_the_responses_route(tmp_path):
    """--structured (item 3) on the Responses route: `text.format`, answered in the schema, read first."""
    import json

    from synthetic_data import make_mcq_jsonl

    import evalkit
    from evalkit.sim import SimConfig, SimThread
    from evalkit.sim.from_bench import answer_key_for

    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=3)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        result = evalkit.run("mcq", "openai/o3-pro", data=str(data), base_url=sim.url, env={"OPENAI_API_KEY": "k"},
                             structured=True, mode="robust", out=str(tmp_path / "run"), cache_dir=str(tmp_path / "c"),
                             progress=False, plots=False, quiet=True)
        forms = [(h.path, h.answer_form) for h in sim.heard if h.method == "POST"]
    assert result.exit_code == 0 and result.summary["metrics"]["accuracy"] == 100.0
    assert {path for path, _ in forms} == {"/v1/responses"}
    assert all(form["text"]["format"]["type"] == "json_schema" and "response_format" not in form for _, form in forms)
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert {r["parse_method"] for r in records} == {"structured"}
    assert all(json.loads(r["response"]) == {"answer": r["parsed"]} for r in records)
