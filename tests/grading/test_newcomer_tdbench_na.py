"""TDBench `--mode official` reads a reply as VLMEvalKit's scoring does after its xlsx round trip (issue 35
item 13): a reply equal to one of pandas' default NA strings ("None", "N/A", "", ...) comes back from
`read_excel` as NaN and is matched as the text "nan". "None" on a yes/no item whose gold is No is wrong
there (it was right in evalkit's official mode, whose option-text rule found "no" in "none"), and the
extractor is shown `Answer: nan`. Robust mode keeps the text. The match is on the whole reply, exactly (checked against
pandas' to_excel / read_excel: " None", "none" and "N/A\\n" come back as written)."""

from __future__ import annotations

import base64
import csv
import io
from pathlib import Path

from PIL import Image

from evalkit.benchmarks.tdbench import TDBench
from evalkit.core.record import Record
from evalkit.grading import vlmeval
from evalkit.grading.grade import grade

PANDAS_DEFAULT_NA = ('', '#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN', '-NaN', '-nan', '1.#IND', '1.#QNAN',
                     '<NA>', 'N/A', 'NA', 'NULL', 'NaN', 'None', 'n/a', 'nan', 'null')


def _yes_no_set(folder: Path) -> dict[str, object]:
    """The release's four rotation TSVs with one yes/no item whose gold is B (No); its queries by id."""
    folder.mkdir()
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (90, 120, 200)).save(buf, "JPEG")
    picture = base64.b64encode(buf.getvalue()).decode()
    for deg in (0, 90, 180, 270):
        with (folder / f"tdbench_rot{deg}.tsv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, delimiter="\t", lineterminator="\n")
            w.writerow(["index", "image", "question", "A", "B", "C", "D", "answer", "category"])
            w.writerow([7, picture, "Is there a car in the image", "Yes", "No", "", "", "B", "Object Presence"])
    bench = TDBench()
    return {q.id: q for q in bench.expand(bench.load(folder, None, {}), {})}


def _graded(bench: TDBench, query, reply: str, mode: str) -> Record:
    record = Record(query_id=query.id, item_id=query.item_id, base_id=query.base_id, variant=query.variant,
                    model="m", request_key="", response=reply, gold=query.gold, category=query.category)
    return grade(bench, query, record, mode)


def test_na_replies_read_as_nan_in_official_mode_only(tmp_path):
    bench, q = TDBench(), _yes_no_set(tmp_path / "td")["7|r0"]
    assert q.gold == "B" and q.options == {"A": "Yes", "B": "No"}
    official, robust = _graded(bench, q, "None", "official"), _graded(bench, q, "None", "robust")
    assert (official.parsed, official.parse_method, official.correct) == (None, "unparsed", False)
    assert (robust.parsed, robust.parse_method) == (None, "unparsed")  # robust: the text as sent, for the extractor
    prompt = bench.judge_request(q, "None", mode="official")
    assert prompt is not None and prompt.prompt.endswith("\nAnswer: nan\nYour output: ")
    assert bench.judge_request(q, "", mode="official").prompt.endswith("\nAnswer: nan\nYour output: ")
    robust_prompt = bench.judge_request(q, "None", mode="robust")
    assert robust_prompt is not None and "nan" not in robust_prompt.prompt and "None" in robust_prompt.prompt
    # not NA for pandas (not the whole cell, or another case): read as written, "none" holds the option "no"
    for reply in (" None", "None ", "none", "NONE", "None."):
        graded = _graded(bench, q, reply, "official")
        assert (graded.parsed, graded.correct) == ("B", True), reply
        assert vlmeval.read_back(reply) == reply


def test_every_pandas_default_na_string_and_nothing_else():
    assert frozenset(PANDAS_DEFAULT_NA) == vlmeval.PANDAS_NA
    assert {vlmeval.read_back(s) for s in PANDAS_DEFAULT_NA} == {"nan"}
    for kept in ("N/A\n", "\tNA", "nan.", "Null", "NAN", "B", "No", "0"):
        assert vlmeval.read_back(kept) == kept
