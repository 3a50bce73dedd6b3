"""What a warm re-run skips must give the same numbers as the long way: a ScoreTable of plain answers
(counted without numpy) against the same table as an array, and image hashes the data's fingerprint
already read (taken, not read again, unless the file changed since)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random

import numpy as np
import pytest

from evalkit.core.types import ImageRef
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.analysis.scoretable import ScoreTable
from evalkit.metrics.analysis.significance import wilson


@pytest.mark.parametrize("seed", range(10))
def test_plain_answers_estimate_as_the_array_does(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 3000)
    units = tuple(f"q{rng.randint(0, n // 2)}" for _ in range(n))  # variants share a unit
    answers = tuple(float(rng.random() < rng.random()) for _ in range(n))
    scale = rng.choice([100.0, 1.0])
    plain = ScoreTable("accuracy", units, answers, None, scale)
    array = ScoreTable("accuracy", units, np.array(answers), None, scale)
    assert plain.estimate() == array.estimate()  # exactly: the same whole-number sums, the same division
    assert plain.binary and array.binary
    assert plain.values.tolist() == list(answers)
    assert ScoreTable("a", units, tuple(a / 2 for a in answers), None, scale).binary is (sum(answers) == 0)


def test_wilson_is_unchanged() -> None:
    z = 1.959963984540054
    for k, n in [(0, 1), (1, 1), (3, 10), (228, 1624), (4999, 5000)]:
        p = k / n
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        assert wilson(k, n) == (float(max(0.0, centre - half)), float(min(1.0, centre + half)))


def test_known_hashes_are_taken_until_the_file_changes(tmp_path) -> None:
    image = tmp_path / "a.jpg"
    image.write_bytes(b"first bytes")
    st = os.stat(image)
    with contextlib.closing(ImagePipeline()) as pipeline:
        pipeline.know_hashes({str(image): (st.st_mtime_ns, st.st_size, "f" * 64)})
        assert pipeline.source_hash(ImageRef("path", str(image))) == "f" * 64  # taken: not read
    image.write_bytes(b"other bytes, longer")  # a new size: hashed from its bytes
    with contextlib.closing(ImagePipeline()) as pipeline:
        pipeline.know_hashes({str(image): (st.st_mtime_ns, st.st_size, "f" * 64)})
        assert pipeline.source_hash(ImageRef("path", str(image))) == hashlib.sha256(b"other bytes, longer").hexdigest()



@pytest.mark.parametrize("template", ["", "plain", "{question}", "Q: {question}\n{options}\n{hint}{question}",
                                      "{unknown} {Question} {} {{question}} {ques tion} {question", "}{hint}{"])
def test_fill_template_as_one_regex_pass(template: str) -> None:
    import re

    from evalkit.core.resources import fill_template

    values = {"question": "why {hint} here?", "options": "A. {x}\nB. y", "hint": ""}
    expected = re.sub(r"\{([a-z_]+)\}", lambda m: values.get(m.group(1), m.group(0)), template)
    assert fill_template(template, **values) == expected


def test_usage_totals_count_numbers_only() -> None:
    from evalkit.core.record import Record
    from evalkit.metrics.basic import usage_totals

    def rec(usage: dict) -> Record:
        return Record("q", "q", "q", {}, "m", "k", "A", "A", usage=usage)

    records = [rec({"input_tokens": 3, "output_tokens": 2.0, "cost_usd": 0.5}), rec({"input_tokens": True}),
               rec({"reasoning_tokens": "7", "output_tokens": 1}), rec({})]
    assert usage_totals(records) == {"input_tokens": 3, "output_tokens": 3, "cost_usd": 0}


def test_record_lines_are_json_dumps() -> None:
    import json

    from evalkit.core.record import Record
    from evalkit.rundir.layout import record_line

    records = [Record("q1", "q1", "q1", {"shift": 2, "lang": "中文"}, "m/é", "k", "Réponse \"B\"\n\t", "B",
                      parsed="B", parse_method="rule", correct=True, usage={"input_tokens": 3, "cost_usd": 1e-7},
                      latency_s=float("nan"), image_fps=["ab" * 64], image_sizes=[[1, 2]], served_by="x"),
               Record("q2", "q2", "q2", {}, "m", "", None, "", error="timeout", error_message="\x00 \u2028 🦜",
                      repeat=2, max_tokens=16)]
    for record in records:
        assert record_line(record) == json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
