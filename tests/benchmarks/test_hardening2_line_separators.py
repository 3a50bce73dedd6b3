"""JSON Lines are split at "\\n" only: U+2028, U+2029 and U+0085 inside a string stay in it.

`str.splitlines` splits at those too (and at \\v, \\f, \\x1c-\\x1e), which JSON allows raw inside a
string: the MCQ, POPE and TDBench readers cut a valid line in two and rejected the file, and the
simulator cut an option holding one short. A "\\r\\n" still ends a line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.ask.editing import _read_records
from evalkit.benchmarks import get_benchmark
from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.core.text.data_json import jsonl_lines
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import prompt_options
from evalkit.sim.server import SimConfig, SimThread

SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c"
QUESTION = "Which colour\u2028dominates\u2029the\u0085image?"


def _mcq_with_separators(folder: Path, n: int = 4) -> Path:
    """make_mcq_jsonl's set with separators in a question and an option, written raw, with CRLF endings."""
    data = make_mcq_jsonl(folder, n, seed=4)
    rows = [json.loads(x) for x in data.read_text(encoding="utf-8").split("\n") if x]
    rows[1]["question"] = QUESTION
    rows[1]["options"]["B"] = f"light{SEPARATORS}green"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), encoding="utf-8")
    return data


def test_mcq_reads_every_separator_inside_a_string(tmp_path):
    data = _mcq_with_separators(tmp_path / "ds")
    items = get_benchmark("mcq").load(data, None, {})
    assert [it.id for it in items] == ["q00000", "q00001", "q00002", "q00003"]
    assert items[1].question == QUESTION and items[1].options["B"] == f"light{SEPARATORS}green"
    assert get_benchmark("mcq").load_lenient(data, None, {}).problems == []


def test_a_bad_line_is_named_by_its_number_in_the_file(tmp_path):
    data = _mcq_with_separators(tmp_path / "ds")
    lines = data.read_bytes().split(b"\r\n")
    data.write_bytes(b"\r\n".join([*lines[:3], b"{broken", *lines[3:]]))
    with pytest.raises(EvalkitError, match=r"data.jsonl: line 4: invalid JSON"):
        get_benchmark("mcq").load(data, None, {})


def test_a_run_asks_and_grades_the_question_whole(tmp_path):
    """Through the command line and the simulator, which reads the options back from the prompt."""
    data = _mcq_with_separators(tmp_path / "ds", 6)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        proc = run_main(["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--base-url", sim.url,
                        "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_bytes().split(b"\n") if x]
    assert len(records) == 6 and all(r["correct"] for r in records), [r["response"] for r in records]


def test_pope_and_tdbench_read_a_separator_inside_a_string(tmp_path):
    shutil.copytree(dataset_path("pope", "images"), tmp_path / "images")
    lines = jsonl_lines(dataset_path("pope", "pope_sample.jsonl").read_text(encoding="utf-8"))
    first = json.loads(lines[0])
    first["text"] = "Is there a\u2028ball in the image?"
    pope = tmp_path / "coco_pope_random.jsonl"
    pope.write_text("\n".join([json.dumps(first, ensure_ascii=False), *lines[1:]]) + "\n", encoding="utf-8")
    items = get_benchmark("pope").load(pope, None, {})
    assert len(items) == len(lines) and "a\u2028ball" in items[0].question

    from synthetic_data import tdbench_set

    gen = tdbench_set(tmp_path / "gen", 4, pairs=False, grounding=False)
    rows = [json.loads(x) for x in jsonl_lines(gen.read_text(encoding="utf-8"))]
    rows[0]["question"] = "What is\u0085on the left?"
    gen.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert len(get_benchmark("tdbench").load(gen, None, {})) == 4


def test_the_simulator_keeps_an_option_whole():
    assert prompt_options(f"Q?\nA. red\nB. light{SEPARATORS}green\nC. blue\r\n") == {
        "A": "red", "B": f"light{SEPARATORS}green", "C": "blue"}


def test_edit_records_keep_a_separator_inside_a_line(tmp_path):
    path = tmp_path / "edits.jsonl"
    rec = {"id": "e1", "file": "e1.png", "error": None, "prompt": f"make it{SEPARATORS}brighter"}
    path.write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    assert _read_records(path) == {"e1": rec}


def test_jsonl_lines_splits_at_newline_only():
    assert jsonl_lines("a\r\nb\u2028c\n\nd") == ["a", "b\u2028c", "", "d"]
    assert jsonl_lines("a\n") == ["a"] and jsonl_lines("") == []
