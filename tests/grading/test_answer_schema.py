"""The structured reply read before the rules (`--structured`, issue 47, item 3): what counts as a valid answer in
the schema, and what falls back to the rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evalkit.benchmarks import get_benchmark
from evalkit.core.types import GenParams, Message, Query
from evalkit.grading.answer_schema import box_schema, choice_schema, default_schema, schema_text


def _query(schema: dict | None, **kw) -> Query:
    base = Query(id="q", item_id="q", base_id="q", variant={}, messages=(Message.user("Which?"),), gold="B",
                 options={"A": "cat", "B": "dog", "C": "tree"})
    query = replace(base, **kw)
    return replace(query, params=GenParams(answer_schema=schema_text(schema) if schema else None))


@pytest.mark.parametrize(("reply", "answer", "method"), [
    ('{"answer": "B"}', "B", "structured"),
    ('```json\n{"answer": "C"}\n```', "C", "structured"),
    ('<think>hmm</think>{"answer": "A"}', "A", "structured"),
    ('{"answer": "E"}', None, "unparsed"),  # outside the enum: the rules read the whole reply (no letter A-C)
    ("The answer is (B).", "B", "rule"),  # not JSON: the rules
    ('{"choice": "B"}', "B", "rule"),  # not in the schema: the rules (which find the B)
])
def test_mcq_reads_the_schema_first_then_the_rules(reply, answer, method):
    bench = get_benchmark("mcq")
    query = _query(choice_schema("ABC"))
    parsed = bench.parse_structured(query, reply) or bench.parse(query, reply, "robust")
    assert (parsed.answer, parsed.method) == (answer, method)


def test_a_box_is_four_numbers_normalised_as_the_rules_store_it():
    bench = get_benchmark("tdbench")
    query = _query(box_schema(), meta={"task": "grounding", "image_size": (200, 100)}, options={}, gold="[0,0,1,1]")
    assert bench.parse_structured(query, '{"box": [0.5, 0.25, 0.1, 0.75]}').answer == "[0.1, 0.25, 0.5, 0.75]"
    assert bench.parse_structured(query, '{"box": [20, 10, 100, 50]}').answer == "[0.1, 0.1, 0.5, 0.5]"  # pixels
    assert bench.parse_structured(query, '{"box": [0.1, 0.2, 0.3]}') is None
    assert bench.parse_structured(query, '{"box": [0.1, true, 0.3, 0.4]}') is None


def test_no_schema_reads_nothing_and_keeps_the_key_text():
    bench = get_benchmark("mcq")
    query = _query(None)
    assert bench.parse_structured(query, '{"answer": "B"}') is None
    assert "answer_schema" not in GenParams().to_dict()


def test_what_each_query_declares():
    assert default_schema(_query(None, meta={"task": "grounding"}))["required"] == ["box"]
    assert default_schema(_query(None))["properties"]["answer"]["enum"] == ["A", "B", "C"]
    assert default_schema(_query(None, options={}, gold="yes"))["properties"]["answer"]["enum"] == ["Yes", "No"]
    assert default_schema(_query(None, options={}, gold="a caption")) is None
