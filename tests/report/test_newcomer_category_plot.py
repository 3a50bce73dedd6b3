"""TDBench's category plot says what its bars are, measures each against its own chance, and puts
grounding on an axis of its own (issue 35 item 6).

It was titled with RE (a fraction of items right at every rotation) over bars of per-category
accuracy (%), drew one "chance 33.3%" line that blends 2- and 4-option questions (no question has that
chance), and put the grounding boxes' hit rate on the answers' accuracy axis. Checked on the plan (the
figure's data), and once on the drawn PNG's recorded chance lines.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from evalkit.benchmarks import get_benchmark
from evalkit.core.record import Record
from evalkit.core.types import Message, Query
from evalkit.grading.grade import chance_pct, chance_per_category
from evalkit.metrics.analysis.result import analyze
from evalkit.report import figures
from evalkit.report.plots_common import CHANCE_KEY

ROTS = (0, 90, 180, 270)
BOX = "[0.25, 0.25, 0.5, 0.5]"
# item -> (category, options, rotations answered right)
ITEMS = {"p0": ("Object Presence", "AB", ROTS), "p1": ("Object Presence", "AB", (0, 90)),
         "c0": ("Object Counting", "ABCD", (0,)), "c1": ("Object Counting", "ABCD", ()),
         "g0": ("Visual Grounding", "", ROTS)}


def _data() -> tuple[list[Query], list[Record]]:
    queries, records = [], []
    for item, (cat, letters, right) in ITEMS.items():
        for rot in ROTS:
            qid, variant = f"{item}|r{rot}", {"rot": rot, **({"task": "grounding"} if not letters else {})}
            gold = "A" if letters else BOX
            answer = gold if rot in right else "B"
            queries.append(Query(qid, item, item, variant, (Message.user("?"),), gold,
                                 options={c: c.lower() for c in letters}, category=cat))
            records.append(Record(query_id=qid, item_id=item, base_id=item, variant=variant, model="m",
                                  request_key="k" + qid, response=answer, gold=gold, parsed=answer,
                                  parse_method="rule", correct=rot in right, category=cat))
    return queries, records


def test_title_bars_chance_and_grounding_agree_on_the_plan(tmp_path):
    queries, records = _data()
    per = chance_per_category(queries)
    assert per == {"chance_per_category": {"Object Counting": 25.0, "Object Presence": 50.0, "Visual Grounding": None}}
    assert chance_pct(queries) == pytest.approx(100 * (0.5 * 8 + 0.25 * 8) / 16)  # the blend: 37.5, no question's
    m = analyze("m", get_benchmark("tdbench"), records, {}, n_boot=100, category_boot=100, reliability_boot=0,
                chance=chance_pct(queries), category_chance=per["chance_per_category"])
    assert m.metric == "RE" and not m.per_answer_headline
    planned = {f.path.name: f for f in figures.plan_figures(tmp_path, [m])}
    cat = planned["categories.png"]
    chart = cat.data
    assert chart["heading"] == "m: accuracy per category (% of answers); overall 43.8%"  # 7 of the 16 answers
    assert "RE" not in chart["heading"] and "overall 43.8% of answers; headline RE " in cat.title
    assert chart["reference"] == (pytest.approx(43.75), "overall 43.8% of answers")
    answers, boxes = chart["panels"]
    assert answers["ylabel"] == "accuracy (%)" and answers["title"] is None
    bars = dict(zip(answers["groups"], answers["values"][0], strict=True))
    assert bars == {"Object Presence": 75.0, "Object Counting": 12.5}  # the bars: % of answers right
    assert dict(zip(answers["groups"], answers["chance"], strict=True)) == {"Object Presence": 50.0,
                                                                           "Object Counting": 25.0}
    assert chart["chance"] == []  # no line across at the blend
    assert (boxes["title"], boxes["groups"], boxes["values"], boxes["chance"]) == \
        ("grounding", ["Visual Grounding"], [[100.0]], [None])
    assert boxes["ylabel"] == "grounding: right (%)"
    assert "reliability.png" in planned  # its g has no blended chance line either (nothing to assert on the plan)

    with Image.open(cat.draw()) as img:  # drawn: a line at each category's own chance, none at 37.5%
        lines = json.loads(img.info[CHANCE_KEY])
    assert sorted(line["label"] for line in lines) == ["chance 25%", "chance 50%"]
    assert all(line["orientation"] == "h" for line in lines)
