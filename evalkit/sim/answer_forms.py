"""Structured answers as the simulated server reads and writes them (`--structured`, issue 47, item 3).

A request asks for its answer in a JSON schema each provider's own way: OpenAI-shaped bodies
`response_format: {type: json_schema, json_schema: {schema}}`, Gemini `generationConfig.responseSchema`
(with `responseMimeType: application/json`), Anthropic `output_config.format: {type: json_schema, schema}` (its
structured outputs: the JSON comes back as a text block) or a forced tool (`tools` + `tool_choice: {type: tool}`),
Bedrock Converse `toolConfig` with `toolChoice: {tool: {name}}`. The model then answers as JSON in that
schema; a forced tool's answer goes back as the dialect's tool-use block (the dialects' `ok`).
"""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
WRONG_BOX = [0.0, 0.0, 0.05, 0.05]  # the box of an answer that is not one (a wrong guess)


def _tool_schema(tools: Any, name: Any, spec_key: str | None, schema_keys: tuple[str, ...]) -> dict[str, Any] | None:
    """The input schema of the tool named `name` among `tools` (each under `spec_key` when given)."""
    for tool in tools if isinstance(tools, list) else []:
        spec = tool.get(spec_key) if spec_key and isinstance(tool, dict) else tool
        if isinstance(spec, dict) and spec.get("name") == name:
            schema: Any = spec
            for key in schema_keys:
                schema = schema.get(key) if isinstance(schema, dict) else None
            return schema if isinstance(schema, dict) else None
    return None


def asked_schema(body: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the answer's JSON schema, the forced tool's name) a request body asks for, in any dialect's form;
    (None, None) for a request that asks for none."""
    if not isinstance(body, dict):
        return None, None
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        schema = fmt["json_schema"].get("schema")
        return (schema, None) if isinstance(schema, dict) else (None, None)
    text = body.get("text")  # the Responses API's `text.format` (evalkit.sim.openai.responses)
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return (schema, None) if isinstance(schema, dict) else (None, None)
    output = body.get("output_config")  # Anthropic's structured outputs: answered as text (evalkit.sim.anthropic)
    fmt = output.get("format") if isinstance(output, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return (schema, None) if isinstance(schema, dict) else (None, None)
    config = body.get("generationConfig", body.get("generation_config"))
    if isinstance(config, dict):
        schema = config.get("responseSchema", config.get("response_schema", config.get("responseJsonSchema")))
        if isinstance(schema, dict):
            return schema, None
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return _tool_schema(body.get("tools"), choice.get("name"), None, ("input_schema",)), str(choice.get("name"))
    tool_config = body.get("toolConfig")
    if isinstance(tool_config, dict):
        forced = (tool_config.get("toolChoice") or {}).get("tool") if isinstance(tool_config.get("toolChoice"),
                                                                                 dict) else None
        if isinstance(forced, dict):
            name = forced.get("name")
            return _tool_schema(tool_config.get("tools"), name, "toolSpec", ("inputSchema", "json")), str(name)
    return None, None


FORM_WORDS = (b'"json_schema"', b'"response_format"', b"esponseSchema", b"esponse_schema", b'"tool_choice"', b'"toolConfig"')


def answer_form(body: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a body that ask for a structured answer, as sent (what tests assert on), or None:
    `response_format`; `generationConfig`'s `responseMimeType` and `responseSchema`; `output_config`; `tools`
    and `tool_choice`; `toolConfig`."""
    form: dict[str, Any] = {k: body[k] for k in ("response_format", "output_config", "tools", "tool_choice",
                                                 "toolConfig") if k in body}
    if isinstance(body.get("text"), dict) and "format" in body["text"]:  # the Responses API's
        form["text"] = body["text"]
    config = body.get("generationConfig", body.get("generation_config"))
    if isinstance(config, dict):
        form.update({k: v for k, v in config.items() if k in ("responseMimeType", "responseSchema",
                                                               "response_mime_type", "response_schema")})
    return form or None


def _kind(schema: Any) -> str:
    return str(schema.get("type", "")).lower() if isinstance(schema, dict) else ""


def _value(schema: Any, answer: str) -> Any:
    """The answer as a value of this (sub)schema: an enum member, four numbers, a string."""
    if not isinstance(schema, dict):
        return answer
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return answer if answer in schema["enum"] else schema["enum"][0]
    if _kind(schema) == "array":
        numbers = [float(x) for x in _NUMBER.findall(answer)] if answer.lstrip().startswith("[") else []
        return numbers if len(numbers) == 4 else list(WRONG_BOX)
    if _kind(schema) in ("number", "integer"):
        numbers = _NUMBER.findall(answer)
        return float(numbers[0]) if numbers else 0
    return answer


def structured_content(schema: dict[str, Any], answer: str) -> str:
    """The JSON text a model answering in `schema` gives for `answer` (a letter, Yes/No or a box): each
    required property holds the answer in its own type."""
    if _kind(schema) != "object" or not isinstance(schema.get("properties"), dict):
        return json.dumps(_value(schema, answer))
    props = schema["properties"]
    names = [n for n in (schema.get("required") or list(props)) if n in props]
    return json.dumps({name: _value(props[name], answer) for name in names})
