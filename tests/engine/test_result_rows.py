"""A RunResult's records as rows for a notebook: `to_rows()` (one dict per query) and `to_pandas()`
(pandas is not a dependency: one clear error without it)."""

from __future__ import annotations

import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest
from run_factory import record

from evalkit.core.errors import EvalkitError
from evalkit.engine.result import RunResult
from evalkit.rundir.rows import COLUMNS

PRICE = {"input_per_m": 2.0, "output_per_m": 10.0, "cached_input_per_m": None, "source": "test", "read_on": "2026-01-01"}


def _result() -> RunResult:
    right = replace(record("q1|s0", True, base="q1", variant={"shift": 0}, category="colour", model="vllm/m"),
                    latency_s=0.5, usage={"input_tokens": 1000, "output_tokens": 100})
    wrong = replace(record("q1|s1", False, base="q1", variant={"shift": 1}, model="vllm/m"), cached=True)
    failed = replace(record("q2|s0", False, base="q2", variant={"shift": 0}, model="vllm/m"), response=None,
                     parsed=None, correct=None, error="timeout", error_message="no reply in 60 s", usage={})
    summary = {"benchmark": "mcq", "model": "vllm/m", "config": {"price": PRICE}}
    return RunResult(summary, [right, wrong, failed], Path("runs/mcq-vllm-m-abc"))


def test_to_rows_gives_one_plain_row_per_query():
    rows = _result().to_rows()
    assert [tuple(r) for r in rows] == [COLUMNS] * 3  # the same keys, in order, as `evalkit export --to csv`
    first, cached, failed = rows
    assert first["question_id"] == "q1" and first["query_id"] == "q1|s0" and first["variant"] == {"shift": 0}
    assert (first["model"], first["run"], first["benchmark"]) == ("vllm/m", "mcq-vllm-m-abc", "mcq")
    assert (first["raw_answer"], first["parsed_answer"], first["gold"], first["correct"]) == ("Answer: A", "A", "A", True)
    assert (first["latency_s"], first["input_tokens"], first["output_tokens"]) == (0.5, 1000, 100)
    assert first["cost_usd"] == pytest.approx(1000 * 2.0 / 1e6 + 100 * 10.0 / 1e6)
    assert cached["correct"] is False and cached["parsed_answer"] == "B" and cached["cost_usd"] == 0.0  # from the cache
    assert (failed["error"], failed["error_message"], failed["correct"], failed["raw_answer"]) == \
        ("timeout", "no reply in 60 s", None, None)
    without_price = RunResult({"benchmark": "mcq", "config": {"price": None}}, _result().records, Path("r"))
    assert [r["cost_usd"] for r in without_price.to_rows()] == [None, None, None]  # unknown, not 0


def test_to_pandas_without_pandas_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails, as where it is not installed
    with pytest.raises(EvalkitError, match=r"to_pandas needs pandas.*pip install pandas.*to_rows\(\)"):
        _result().to_pandas()


def test_to_pandas_builds_a_frame_of_the_rows(monkeypatch):
    try:
        import pandas
    except ImportError:  # a stand-in: what to_pandas hands to pandas.DataFrame
        pandas = types.SimpleNamespace(DataFrame=lambda rows, columns: {"rows": rows, "columns": columns})
        monkeypatch.setitem(sys.modules, "pandas", pandas)
    result = _result()
    frame = result.to_pandas()
    if isinstance(frame, dict):
        assert frame == {"rows": result.to_rows(), "columns": list(COLUMNS)}
    else:
        assert list(frame.columns) == list(COLUMNS) and len(frame) == 3
        assert frame["correct"].tolist() == [True, False, None]
