"""A TDBench option cell holding `None` (issue 44 item 9). VLMEvalKit reads the TSV with pandas' defaults,
which read "None" as a missing value: its prompt leaves the option out, and a reply naming it cannot be
read (scored 0). Running VLMEvalKit@3ba9220a's own `build_prompt` and `mcq_vanilla_eval` (pandas 2.3.3) on
this very fixture gave the prompts in OFFICIAL_PROMPTS and, for predictions "B", "C", "D" at rot0, hits
1, 0, 1 ("Failed in Prefetch" for index 2, whose gold C is the None cell). `--mode official` now asks and
scores such a set the same way and says once how many options were dropped (console, summary.json and
report.md, lint.json); `--mode robust` keeps refusing a gold that is no option (0.3 refused both)."""

from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path

from cli_under_test import run_cli
from PIL import Image

from evalkit.sim.answerkey import AnswerEntry, AnswerKey
from evalkit.sim.server import SimConfig, SimThread

ROWS = [("1", "Is there a white car in the image?", ["Yes", "No", "", ""], "B", "Object Presence"),
        ("2", "In which cell of a 3x3 grid is the white car?", ["Top-center", "Middle-left", "Top-right",
                                                                 "Bottom-right"], "C", "Object Localization"),
        ("3", "Where is the white car relative to the blue car?", ["left", "right", "top", "bottom"], "D",
         "Spatial Relationship")]
NONE_CELLS = {("2", 2), ("3", 0)}  # at rot0: index 2's gold cell C, index 3's cell A
# VLMEvalKit@3ba9220a's ImageMCQDataset.build_prompt on tdbench_rot0.tsv below (its text part)
OFFICIAL_PROMPTS = {
    "2": "Question: In which cell of a 3x3 grid is the white car?\nOptions:\nA. Top-center\nB. Middle-left\n"
         "D. Bottom-right\nPlease select the correct answer from the options above. \n",
    "3": "Question: Where is the white car relative to the blue car?\nOptions:\nB. right\nC. top\nD. bottom\n"
         "Please select the correct answer from the options above. \n",
}


def _tdbench_folder(folder: Path) -> Path:
    """The official form: four rotation TSVs of three problems, two cells holding None at rot0."""
    folder.mkdir(parents=True)
    for deg in (0, 90, 180, 270):
        with (folder / f"tdbench_rot{deg}.tsv").open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            w.writerow(["index", "image", "question", "A", "B", "C", "D", "answer", "category"])
            for k, (idx, question, options, answer, category) in enumerate(ROWS):
                buf = io.BytesIO()
                Image.new("RGB", (32, 24), ((40 * k + deg) % 256, 90, 160)).rotate(deg, expand=True).save(buf, "PNG")
                cells = ["None" if deg == 0 and (idx, j) in NONE_CELLS else o for j, o in enumerate(options)]
                w.writerow([idx, base64.b64encode(buf.getvalue()).decode(), question, *cells, answer, category])
    return folder


def _key() -> AnswerKey:
    """What the simulated model knows: every prompt it will see, answered with the gold letter (a model
    that is always right), built here from VLMEvalKit's layout, not by the loader under test."""
    entries = []
    for idx, question, options, answer, _ in ROWS:
        shown = [{k: v for k, v in zip("ABCD", options, strict=True) if v}]
        if any(i == idx for i, _ in NONE_CELLS):
            shown.append({k: v for j, (k, v) in enumerate(zip("ABCD", options, strict=True))
                          if v and (idx, j) not in NONE_CELLS})
        for opts in shown:
            text = (f"Question: {question}\nOptions:\n" + "".join(f"{k}. {v}\n" for k, v in opts.items())
                    + "Please select the correct answer from the options above. \n")
            entries.append(AnswerEntry(base_id=idx, text=text, images=["-"], answer=answer, options=opts))
    return AnswerKey(entries)


def _records(run: Path) -> dict[str, dict]:
    return {r["query_id"]: r for r in map(json.loads, (run / "records.jsonl").read_text().splitlines())}


def test_official_mode_reads_a_none_cell_as_vlmevalkit_does_and_says_how_many_options_were_dropped(tmp_path):
    data = _tdbench_folder(tmp_path / "td")
    with SimThread(SimConfig(answer_key=_key())) as sim:
        said = run_cli(["run", "tdbench", "--mode", "official", "--data", str(data), "--model", "vllm/sim-model",
                        "--base-url", sim.url, "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"],
                       timeout=240)
        asked = sim.counters.completions
    assert said.returncode == 0, said.stderr[-3000:]
    assert asked == 12  # every rotation of every problem asked: nothing stopped the set
    records = _records(tmp_path / "run")
    for idx, prompt in OFFICIAL_PROMPTS.items():
        assert records[f"{idx}|r0"]["prompt"] == prompt  # the very prompt VLMEvalKit builds
    gold_dropped = records["2|r0"]
    assert gold_dropped["response"] == "C" and gold_dropped["gold"] == "C"  # the model named the gold...
    assert gold_dropped["correct"] is False and gold_dropped["parsed"] is None  # ...which VLMEvalKit scores 0
    assert records["3|r0"]["correct"] is True and records["1|r0"]["correct"] is True  # hits 1, 1 as there
    assert sum(r["correct"] is True for r in records.values()) == 11
    note = ("tdbench: 2 option cells holding 'None' (or 'nan', 'NaN') were read as missing, as VLMEvalKit's "
            "pipeline (pandas) reads them, and left out of the prompt; 1 of them is the gold answer, so that 1 "
            "question can only be scored wrong, as there")
    assert (said.stdout + said.stderr).count(note) == 1  # said once, at the start
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    found = [f for f in summary["findings"] if f["kind"] == "option-read-as-missing"]
    assert len(found) == 1 and found[0]["severity"] == "error" and found[0]["items"] == ["2", "3"]
    assert note.removeprefix("tdbench: ") in found[0]["message"]
    assert note.removeprefix("tdbench: ") in (tmp_path / "run" / "report.md").read_text()
    lint = json.loads((tmp_path / "run" / "lint.json").read_text())
    cells = sorted((f["items"][0], f["severity"]) for f in lint["findings"] if f["kind"] == "option-read-as-missing")
    assert cells == [("2", "error"), ("3", "warning")]
    assert not [f for f in lint["findings"] if f["kind"] == "gold-not-in-options"]  # named once, for what it is


def test_robust_mode_keeps_refusing_a_gold_that_is_no_option(tmp_path):
    data = _tdbench_folder(tmp_path / "td")
    with SimThread(SimConfig(answer_key=_key())) as sim:
        said = run_cli(["run", "tdbench", "--mode", "robust", "--data", str(data), "--model", "vllm/sim-model",
                        "--base-url", sim.url, "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"])
        requests = sim.counters.snapshot()["requests"]
    lines = [line for line in said.stderr.splitlines() if line.strip()]
    assert said.returncode == 2 and requests == 0
    assert lines == [f"evalkit: error: {data / 'tdbench_rot0.tsv'}: row 2 (index 2): answer 'C' is not among the "
                     "options A, B, D"]
