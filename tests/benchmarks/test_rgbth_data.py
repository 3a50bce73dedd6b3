"""RGB-Th-Bench's data as read: the loader on the bundled sample and on the real release (its counts and
duplicate questions; the `shared_data` fixture skips it when the shared data folder is absent), the
loader's errors naming file and block, and duplicate questions as findings beside the scores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rgbth_common import SAMPLE

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.prepare import prepare
from evalkit.benchmarks.rgbth import load_release
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.metrics.rgbth import PAPER_SKILLS, RGB_TH_TXT


def test_loader_on_bundled_sample():
    paper, every = load_release(SAMPLE), load_release(SAMPLE, None)
    assert (len(paper), len(every)) == (3 * 14 * 4, 3 * 16 * 4)
    assert {it.category for it in paper} == set(PAPER_SKILLS)
    first = every[0]
    assert first.id == "Source 1/Fuse Box Door/b00/q0" and len(first.images) == 1
    assert first.images[0].value.endswith("Source 1/Fuse Box Door/rgb.jpg")
    pair = next(it for it in every if it.category == RGB_TH_TXT[0] and it.id.startswith("Source 2/1/"))
    assert [Path(str(r.value)).name for r in pair.images] == ["rgb.png", "thermal.png"]
    assert len({it.id for it in every}) == len(every)


def test_loader_errors_name_file_and_block(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(SAMPLE, tree, ignore=shutil.ignore_patterns("*.py"))
    path = tree / "Source 2" / "1" / "questions.json"
    doc = json.loads(path.read_text())
    doc["data"][3]["data_id"] = "1/missing.png"
    path.write_text(json.dumps(doc))
    with pytest.raises(EvalkitError, match=r"questions\.json: block 3: image file not found"):
        load_release(tree)
    doc["data"][3]["data_id"] = "1/rgb.png"
    doc["data"][5]["QAs"][2]["answer"] = "Maybe"
    path.write_text(json.dumps(doc))
    with pytest.raises(EvalkitError, match=r"block 5, question 2: answer 'Maybe'"):
        load_release(tree)
    with pytest.raises(EvalkitError, match="--skills"):
        prepare("rgb-th-bench", {"data": str(tree), "skills": "nonsense"})


def test_real_loader_counts_and_duplicate_warnings(shared_data):
    data = shared_data / "rgb-th-bench"
    bench, items, _, *_ = prepare("rgb-th-bench", {"data": str(data)})
    assert len(items) == 1624 and len({it.category for it in items}) == 14
    assert len(load_release(data, None)) == 1856
    assert len(bench.warnings) == 2
    contradictory = [w for w in bench.warnings if "contradictory" in w]
    assert len(contradictory) == 1 and "Source 1/Fuse panel 2" in contradictory[0]
    assert "purple, orange, yellow" in contradictory[0]
    assert any("Source 2/3" in w and "same gold answer" in w for w in bench.warnings)


def test_duplicate_questions_are_findings_beside_the_scores():
    """A question asked twice on one scene: an error finding when the golds contradict (no model can
    get both), a warning when they agree; in summary.json, report.md and a console line."""
    import io

    from rich.console import Console

    from evalkit.grading.grade import summarize
    from evalkit.report.console import print_summary
    from evalkit.report.markdown import render_report

    ctx = "Based on this image, answer ...\n"

    def rec(qid: str, question: str, gold: str) -> Record:
        return Record(query_id=qid, item_id=qid, base_id=qid, variant={}, model="m", request_key="k", response=gold,
                      gold=gold, parsed=gold, parse_method="rule", correct=True, category="Object Counting",
                      prompt=ctx + question)

    records = [rec("Source 2/1/b01/q1", "Is there a car?", "Yes"), rec("Source 2/1/b01/q2", "Is there a car?", "No"),
               rec("Source 2/3/b02/q1", "Is it hot?", "Yes"), rec("Source 2/3/b05/q1", "Is it hot?", "Yes"),
               rec("Source 2/4/b01/q1", "Is it hot?", "No")]
    bench = get_benchmark("rgb-th-bench")
    summary = summarize(bench, records, model="m", mode="official", n_items=5, n_queries=5, options={}, config={},
                        judge=None)
    assert [(f["severity"], f["kind"], f["file"], f["items"]) for f in summary["findings"]] == [
        ("error", "duplicate-question", "Source 2/1/questions.json", ["Source 2/1/b01/q1", "Source 2/1/b01/q2"]),
        ("warning", "duplicate-question", "Source 2/3/questions.json", ["Source 2/3/b02/q1", "Source 2/3/b05/q1"])]
    report = render_report(summary)
    assert report.index("## Data findings") < report.index("## Counts")
    assert "| error | duplicate-question | Source 2/1/questions.json |" in report
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=120))
    assert "2 data findings (1 error, 1 warning): see report.md" in out.getvalue()
