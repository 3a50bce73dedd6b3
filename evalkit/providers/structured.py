"""`--structured` (issue 47, item 3): the answer's JSON schema in each provider's own fields.

One function per wire format, each a pure map from the request's `GenParams.answer_schema` (None: no field
at all, so a request without `--structured` is the same bytes as before) to the fields it adds; the
runner is unchanged. What each API documents (and the date it was read) is in docs/providers.md.

- OpenAI, Azure OpenAI, OpenAI-compatible servers (vLLM, SGLang), OpenRouter: Chat Completions'
  `response_format: {"type": "json_schema", "json_schema": {name, schema, strict: true}}`; on the Responses
  route, `text.format` (`responses_fields`).
- Gemini (google/, vertex/): `response_mime_type: application/json` and `response_schema`, the OpenAPI
  subset Gemini's `Schema` takes (upper-case types; no `additionalProperties`).
- Anthropic (anthropic/, Claude on Bedrock and Vertex AI): a model that takes Anthropic's structured outputs (its
  provider record's `json_output` pattern) gets `output_config.format: {type: json_schema, schema}` and answers
  with the JSON as ordinary text, thinking on or off; any other Claude model gets one tool whose `input_schema`
  is the schema, forced with `tool_choice: {type: tool, name}`; the API refuses a forced tool with extended
  thinking on, so that combination is refused before anything is sent (`structured_problem`).
- Bedrock Converse: `toolConfig` with the same tool, forced (`toolChoice: {tool: {name}}`).

The Anthropic and Bedrock clients return a forced tool's input, JSON-encoded, as the response text.
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.types import GenParams
from evalkit.providers.registry import find, is_claude, takes_json_output

TOOL_NAME = "answer"  # the one tool a structured request forces
SCHEMA_NAME = "answer"  # the json_schema's name (OpenAI: letters, digits, _ and -)
TOOL_DESCRIPTION = "Give the answer to the question, in this form."
THINKING_REFUSED = ("--structured cannot go with extended thinking on this Claude model (--reasoning-effort, "
                    "--thinking-budget or --extra thinking): it has no structured outputs, and the API refuses the "
                    "forced tool sent instead with thinking on; drop one of them")


def openai_fields(params: GenParams) -> dict[str, Any]:
    """Chat Completions' `response_format` (OpenAI, Azure, vLLM, SGLang, OpenRouter), or {}."""
    schema = params.schema()
    if schema is None:
        return {}
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True}}}


def responses_fields(params: GenParams) -> dict[str, Any]:
    """The Responses API's `text.format` (`{"type": "json_schema", name, schema, strict}`), or {}: for the
    Responses route (`/v1/responses`), where Chat Completions' `response_format` is not taken."""
    schema = params.schema()
    if schema is None:
        return {}
    return {"text": {"format": {"type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": True}}}


def _gemini_schema(schema: Any) -> Any:
    """A JSON schema in the OpenAPI subset Gemini's `Schema` takes: `type` in capitals, `minItems` and
    `maxItems` kept, `additionalProperties` (which it does not take) left out."""
    if isinstance(schema, list):
        return [_gemini_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "additionalProperties":
            continue
        if key == "type" and isinstance(value, str):
            out[key] = value.upper()
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _gemini_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = _gemini_schema(value)
        else:
            out[key] = value
    return out


def gemini_fields(params: GenParams) -> dict[str, Any]:
    """GenerateContentConfig's `response_mime_type` and `response_schema` (generationConfig's
    responseMimeType and responseSchema on the wire), or {}."""
    schema = params.schema()
    if schema is None:
        return {}
    return {"response_mime_type": "application/json", "response_schema": _gemini_schema(schema)}


def anthropic_fields(params: GenParams) -> dict[str, Any]:
    """Messages' `tools` (one) and `tool_choice` forcing it, or {}."""
    schema = params.schema()
    if schema is None:
        return {}
    return {"tools": [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": schema}],
            "tool_choice": {"type": "tool", "name": TOOL_NAME}}


def json_output_fields(params: GenParams) -> dict[str, Any]:
    """Messages' `output_config.format` (Anthropic's structured outputs: the reply is the JSON as text), or {}."""
    schema = params.schema()
    if schema is None:
        return {}
    return {"output_config": {"format": {"type": "json_schema", "schema": schema}}}


def converse_fields(params: GenParams) -> dict[str, Any]:
    """Converse's `toolConfig`: one tool, forced, or {}."""
    schema = params.schema()
    if schema is None:
        return {}
    return {"toolConfig": {"tools": [{"toolSpec": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                                   "inputSchema": {"json": schema}}}],
                           "toolChoice": {"tool": {"name": TOOL_NAME}}}}


def tool_text(tool_input: Any) -> str:
    """A forced tool's input as the response text: its JSON (what the benchmark's structured reader reads)."""
    return json.dumps(tool_input, ensure_ascii=False, sort_keys=True)


def thinking_asked(effort: str | None, budget: int | None, extra: dict[str, Any] | None) -> bool:
    """Extended thinking asked for through the reasoning switch or `--extra thinking`."""
    thinking = (extra or {}).get("thinking")
    if isinstance(thinking, dict):
        return thinking.get("type") in ("enabled", "adaptive")
    return (effort is not None and effort != "none") or bool(budget)


def structured_problem(claude: bool, structured: bool, effort: str | None, budget: int | None,
                       extra: dict[str, Any] | None) -> str | None:
    """Why `--structured` cannot be sent to this model (one line), or None: a Claude model (a forced tool) with
    extended thinking on."""
    if structured and claude and thinking_asked(effort, budget, extra):
        return THINKING_REFUSED
    return None


def asked_as_claude(provider: str, model: str) -> bool:
    """Asked through Anthropic's Messages API: its own record's wire, or Claude on a cloud serving several
    vendors (registry.is_claude)."""
    record = find(provider)
    return record is not None and (record.wire == "messages" or is_claude(provider, model))


def asked_with_a_tool(provider: str, model: str) -> bool:
    """A Claude model whose structured answer is a forced tool: it has no structured outputs of its own."""
    return asked_as_claude(provider, model) and not takes_json_output(provider, model)


def check_structured(model: str, structured: bool, effort: str | None, budget: int | None,
                     extra: dict[str, Any] | None) -> None:
    """Refuse, as one line, `--structured` where the model's API cannot take it (before anything is written)."""
    provider, _, name = model.partition("/")
    problem = structured_problem(structured and asked_with_a_tool(provider, name), structured, effort, budget, extra)
    if problem is not None:
        raise EvalkitError(problem)
