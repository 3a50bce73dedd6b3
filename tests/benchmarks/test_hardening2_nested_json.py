"""JSON nested too deeply in a data file is invalid JSON like any other: `run` exits 2 with one line
naming the file and line, `lint` reports the row or file as unreadable.

`json.loads` raises RecursionError, not JSONDecodeError, on `[[[…]]]` nested a few thousand deep,
and every data loader caught only the latter: a traceback in `lint` and `run` (exit 1) for an MCQ
JSONL line, a nested `meta`, an MCQ .json list and an IF-Bench file alike.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_under_test import run_main
from synthetic_data import make_mcq_jsonl

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.pope import load_file
from evalkit.benchmarks.readers.mmerealworld import load_json
from evalkit.benchmarks.readers.tdbench import load_generated
from evalkit.benchmarks.rgbth import load_questions_file
from evalkit.core.errors import EvalkitError
from evalkit.core.text import data_json
from evalkit.data.lock import read_lock

DEEP = "[" * 200_000 + "]" * 200_000
TOO_DEEP = "invalid JSON (nested too deeply)"


def _mcq_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """Each form of the damage: (data file, where the message says it is)."""
    data = make_mcq_jsonl(folder, 3, seed=9)
    first, second, third = data.read_text(encoding="utf-8").splitlines()
    line = folder / "line.jsonl"
    line.write_text(f'{first}\n{{"id":"q","x":{DEEP}}}\n{third}\n', encoding="utf-8")
    meta = folder / "meta.jsonl"
    meta.write_text(f'{first}\n{second}\n{second[:-1]}, "meta": {{"notes": {DEEP}}}}}\n', encoding="utf-8")
    listed = folder / "listed.json"
    listed.write_text(f'[{first}, {{"id":"q","x":{DEEP}}}]', encoding="utf-8")
    ifbench = folder / "ifbench.json"
    ifbench.write_text(f'{{"id":"q","x":{DEEP}}}', encoding="utf-8")
    return {"mcq-line": (line, "line 2: "), "mcq-meta": (meta, "line 3: "), "mcq-json": (listed, ""),
            "if-bench": (ifbench, "")}


@pytest.fixture(scope="module")
def deep_files(tmp_path_factory):
    return _mcq_files(tmp_path_factory.mktemp("deep"))


FORMS = ("mcq-line", "mcq-meta", "mcq-json", "if-bench")


@pytest.mark.parametrize("form", FORMS)
def test_run_says_invalid_json_in_one_line_and_exits_2(deep_files, tmp_path, form):
    path, where = deep_files[form]
    bench = "if-bench" if form == "if-bench" else "mcq"
    proc = run_main(["run", bench, "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--data", str(path),
                    "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"evalkit: error: {path}: {where}{TOO_DEEP}"]


@pytest.mark.parametrize("form", FORMS)
def test_lint_reports_the_row_or_file_as_unreadable(deep_files, form):
    path, where = deep_files[form]
    bench = "if-bench" if form == "if-bench" else "mcq"
    proc = run_main(["lint", bench, "--data", str(path)])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert proc.returncode == 1  # its findings hold an error
    finding = "unreadable-file" if not where else "unreadable-row"
    assert any(finding in ln and TOO_DEEP in ln for ln in proc.stdout.splitlines()), proc.stdout


# ---- the other loaders of user data -------------------------------------------------------------

def test_pope_and_tdbench_lines(tmp_path):
    pope = tmp_path / "coco_pope_random.jsonl"
    pope.write_text(f'{{"question_id": 1, "x": {DEEP}}}\n', encoding="utf-8")
    with pytest.raises(EvalkitError, match=r"coco_pope_random.jsonl:1: invalid JSON \(nested too deeply\)$"):
        load_file(pope, tmp_path)
    gen = tmp_path / "gen.jsonl"
    gen.write_text(f"\n{DEEP}\n", encoding="utf-8")
    with pytest.raises(EvalkitError, match=r"gen.jsonl: line 2: invalid JSON \(nested too deeply\)$"):
        load_generated(gen)
    got = get_benchmark("pope").load_lenient(pope, tmp_path, {})
    assert (got.problems[0].row, got.problems[0].kind) == ("line 1", "unreadable-row")


def test_whole_file_loaders_and_the_lock(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP, encoding="utf-8")
    for load in (lambda p: load_json(p), lambda p: load_questions_file(p, None), read_lock):
        with pytest.raises(EvalkitError, match=r"nested too deeply"):
            load(deep)


def test_genvip_names_the_question_file(tmp_path):
    from evalkit.benchmarks.ifbench_genvip import image_names

    deep = tmp_path / "deep.json"
    deep.write_text(DEEP, encoding="utf-8")
    with pytest.raises(EvalkitError, match=r"deep.json: cannot read \(nested too deeply\)"):
        image_names(tmp_path, deep)


def test_the_helper_parses_as_json_does_and_raises_a_json_error():
    assert data_json.loads('{"a": [1, "x"]}') == json.loads('{"a": [1, "x"]}')
    with pytest.raises(json.JSONDecodeError) as caught:
        data_json.loads(DEEP)
    assert str(caught.value) == "nested too deeply" and data_json.at_column(caught.value) == "nested too deeply"
    with pytest.raises(json.JSONDecodeError) as caught:
        data_json.loads('{"a": }')
    assert data_json.at_column(caught.value) == "Expecting value at column 7"


def test_the_lenient_ifbench_hook_reports_the_file_as_unreadable(tmp_path):
    """What lint calls for a folder holding the question file."""
    src = tmp_path / "if"
    src.mkdir()
    shutil.copyfile(_mcq_files(tmp_path / "m")["if-bench"][0], src / "ifbench.json")
    got = get_benchmark("if-bench").load_lenient(src, None, {})
    assert got.items == [] and [p.kind for p in got.problems] == ["unreadable-file"]



class _Finalized:
    """Garbage in a cycle whose finalizer needs a few frames of stack, as an SDK's or a session's may."""

    def __init__(self, ran: list[int]):
        self.me, self.ran = self, ran

    def __del__(self):
        self.ran.append((lambda: len(repr(self.ran)))())


def _deepest() -> int:
    """How deep data_json.loads can nest from here."""
    low, high = 1, 20_000
    while low < high:
        mid = (low + high + 1) // 2
        try:
            data_json.loads("[" * mid + "]" * mid)
            low = mid
        except data_json.NestedTooDeeply:
            high = mid - 1
    return low


def test_a_collection_deep_in_the_parse_prints_nothing(monkeypatch):
    """Garbage left by earlier work must not be finalized deep inside the parser: its RecursionError was
    printed ("Exception ignored in sys.unraisablehook") around the one-line error (seen in the suite).
    The collector's threshold is set so that a collection falls at each depth near the parser's limit."""
    import gc

    unraisable: list[object] = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    ran: list[int] = []
    refused: list[int] = []
    deepest, threshold = _deepest(), gc.get_threshold()
    gc.freeze()  # what the process holds already is left out of the collections below: they stay quick
    try:
        for at in range(deepest - 30, deepest + 5):
            gc.collect()
            gc.set_threshold(at)  # the next collection comes after `at` new containers: one per level parsed
            _Finalized(ran)
            try:  # (not pytest.raises: its own objects would move the collection)
                data_json.loads(DEEP)
            except data_json.NestedTooDeeply:
                refused.append(at)
            gc.set_threshold(*threshold)
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
    gc.collect()
    assert len(refused) == 35 and unraisable == [] and len(ran) == 35  # each finalized after the parse
