"""`--structured` (issue 47, item 3): the JSON schema of a query's answer, and its structured reply read.

A benchmark declares what its answer is, per query (`Benchmark.answer_schema`): a letter among the
query's options, Yes or No, or a box `[x1, y1, x2, y2]` (TDBench grounding); None where it has none
(then nothing is sent for that query). The schema rides in the query's `GenParams.answer_schema` (so it is
in the request key only when set) and each provider maps it to its own fields (providers/structured.py).

The reply is read first as that JSON object; its value is handed to the benchmark's own rule reader (a
clean "B", "Yes" or "[0.1, 0.2, 0.5, 0.6]"), so a structured answer is stored exactly as a rule-read one
is, its method "structured". A reply that is not valid JSON in the schema falls back to the rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from evalkit.core.record import Parsed
from evalkit.core.types import Query
from evalkit.grading.extract import strip_reasoning

ANSWER = "answer"  # the property holding a letter or Yes/No
BOX = "box"  # the property holding TDBench's box
YES_NO = ("Yes", "No")
STRUCTURED = "structured"  # the parse method of an answer read from the structured reply


def choice_schema(values: Iterable[str]) -> dict[str, Any]:
    """An object with one property, `answer`, one of `values` (a letter among the options, or Yes/No)."""
    return {"type": "object", "properties": {ANSWER: {"type": "string", "enum": list(values)}},
            "required": [ANSWER], "additionalProperties": False}


def box_schema() -> dict[str, Any]:
    """An object with one property, `box`: four numbers, x1, y1, x2, y2 relative to the image (0..1)."""
    return {"type": "object", "properties": {BOX: {
        "type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4,
        "description": "x1, y1, x2, y2: the box's top-left and bottom-right corners, relative to the image "
                       "(0 to 1)"}}, "required": [BOX], "additionalProperties": False}


def default_schema(query: Query) -> dict[str, Any] | None:
    """What most benchmarks answer: a box for a grounding query, a letter among the options, Yes/No for a
    yes/no question, else None (an open answer: nothing is sent)."""
    if query.meta.get("task") == "grounding":
        return box_schema()
    if query.options:
        return choice_schema(query.options)
    if query.gold.strip().lower() in ("yes", "no"):
        return choice_schema(YES_NO)
    return None


def schema_text(schema: Mapping[str, Any]) -> str:
    """The schema as GenParams keeps it: canonical JSON (sorted keys), so equal schemas are equal values."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def apply_structured(queries: list[Query], schema_of: Callable[[Query], dict[str, Any] | None]) -> list[Query]:
    """Each query with its answer's schema in its parameters (a query without one is left as it is)."""
    texts: dict[int, str] = {}  # shared schemas encoded once (a set's questions share their letters)
    out = []
    for q in queries:
        schema = schema_of(q)
        if schema is None:
            out.append(q)
            continue
        text = schema_text(schema)
        text = texts.setdefault(hash(text), text)
        out.append(replace(q, params=replace(q.params, answer_schema=text)))
    return out


def _json_object(text: str) -> dict[str, Any] | None:
    """The reply as one JSON object (a ```json fence around it allowed), else None."""
    body = strip_reasoning(text).strip()
    if body.startswith("```"):
        body = body.strip("`").strip()
        body = body[4:].strip() if body[:4].lower() == "json" else body
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def structured_value(schema: Mapping[str, Any], text: str) -> str | None:
    """The answer a structured reply gives, as plain text for the rule reader, or None when the reply is not
    an object in the schema (an enum value outside the enum, a box that is not four numbers)."""
    obj = _json_object(text)
    props = schema.get("properties") or {}
    if obj is None:
        return None
    if BOX in props:
        box = obj.get(BOX)
        if not isinstance(box, list) or len(box) != 4 or \
                not all(isinstance(v, int | float) and not isinstance(v, bool) for v in box):
            return None
        return "[" + ", ".join(repr(float(v)) for v in box) + "]"
    if ANSWER in props:
        value = obj.get(ANSWER)
        allowed = props[ANSWER].get("enum")
        if not isinstance(value, str) or (allowed and value not in allowed):
            return None
        return value
    return None


def read_structured(query: Query, text: str, rules: Callable[[Query, str], Parsed]) -> Parsed | None:
    """The structured answer of a reply, read by the benchmark's `rules` (its robust parse), or None: no
    schema was sent, or the reply is not valid in it (the caller then reads the whole reply by the rules)."""
    schema = query.params.schema()
    if schema is None or not text:
        return None
    value = structured_value(schema, text)
    if value is None:
        return None
    parsed = rules(query, value)
    return Parsed(parsed.answer, STRUCTURED, parsed.refusal) if parsed.answer is not None else None
