"""TDBench `--mode official` = VLMEvalKit@3ba9220a: the requests it sends, the images as stored, how
answers and extractor replies are read, its RotationalEval "Average" row, and a run end to end."""

from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from evalkit.benchmarks.tdbench import TDBench
from evalkit.core.types import ImagePart
from evalkit.engine.evaluate import run
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.tdbench import RotationOutcome, vlmevalkit_table
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.machinery import state as sim_state
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

GROUNDING_TEXT = (
    "\nPlease output the coordinates of the {} in the image in the format [x1, y1, x2, y2]. Do not include any "
    "additional text. Respond with relative coordinates between 0 and 1, with top left corner (0, 0), top right "
    "(1, 0) and bottom right (1, 1)."
)
CATS = ("Object Presence", "Spatial Relationship", "Object Counting")


def _jpeg(seed: int, size: tuple[int, int] = (120, 90)) -> bytes:
    """A non-square JPEG (quality 83): any stretch or re-encode would change its bytes."""
    img = Image.new("RGB", size, ((seed * 53) % 256, (seed * 97) % 256, 120))
    ImageDraw.Draw(img).rectangle((5 + seed % 40, 10, 40 + seed % 40, 50), fill=(250, 250, 250))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=83)
    return buf.getvalue()


def _official_set(folder: Path, n: int = 9, n_boxes: int = 3, hint: bool = False) -> dict[bytes, str]:
    """The release's layout: tdbench_rot*.tsv and tdbench_grounding_rot*.tsv, base64 JPEGs. Returns
    each stored image's bytes -> its index."""
    folder.mkdir(parents=True, exist_ok=True)
    stored: dict[bytes, str] = {}
    for deg in (0, 90, 180, 270):
        with (folder / f"tdbench_rot{deg}.tsv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, delimiter="\t", lineterminator="\n")
            w.writerow(["index", "image", "question", "A", "B", "C", "D", "answer", "category",
                        *(["hint"] if hint else [])])
            for i in range(n):
                raw = _jpeg(i * 4 + deg // 90)
                stored[raw] = str(i)
                yes_no = i % 3 == 0
                opts = ["Yes", "No", "", ""] if yes_no else ["left", "right", "top", "bottom"]
                w.writerow([i, base64.b64encode(raw).decode(), f"Where is the white block? (#{i})", *opts,
                            "A" if yes_no else "ABCD"[(i + deg // 90) % 4], CATS[i % 3],
                            *(["Look at the white block."] if hint else [])])
        with (folder / f"tdbench_grounding_rot{deg}.tsv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, delimiter="\t", lineterminator="\n")
            w.writerow(["index", "image", "question", "answer", "category"])
            for i in range(n_boxes):
                raw = _jpeg(100 + i * 4 + deg // 90, (96, 64))
                stored[raw] = f"g{i}"
                w.writerow([f"g{i}", base64.b64encode(raw).decode(), f"white block {i}",
                            "[0.05, 0.15, 0.45, 0.8]", "Visual Grounding"])
    return stored


def _queries(folder: Path, **opts):
    bench = TDBench()
    return bench, {q.id: q for q in bench.expand(bench.load(folder, None, opts), opts)}


# ---------------------------------------------------------------------------------------
# requests
# ---------------------------------------------------------------------------------------


def test_requests_are_vlmevalkits_text_and_layout(tmp_path):
    _official_set(tmp_path / "off", hint=True)
    _, qs = _queries(tmp_path / "off")
    mc, yn, box = qs["1|r90"], qs["0|r0"], qs["g2|r270"]
    # ImageMCQDataset.build_prompt: hint, question, "Options:" and one "X. text" line per non-empty option
    assert mc.prompt_text() == ("Hint: Look at the white block.\nQuestion: Where is the white block? (#1)\n"
                                "Options:\nA. left\nB. right\nC. top\nD. bottom\n"
                                "Please select the correct answer from the options above. \n")
    assert yn.prompt_text() == ("Hint: Look at the white block.\nQuestion: Where is the white block? (#0)\n"
                                "Options:\nA. Yes\nB. No\nPlease select the correct answer from the options above. \n")
    # TDBenchGrounding.build_prompt: a leading newline, the object name in its sentence
    assert box.prompt_text() == GROUNDING_TEXT.format("white block 2")
    for q in (mc, yn, box):  # the image(s) first, then the text, in one user message
        parts = q.messages[0].parts
        assert len(q.messages) == 1 and isinstance(parts[0], ImagePart) and not isinstance(parts[-1], ImagePart)
    # the ids resume keys on are unchanged
    assert sorted(qs)[:3] == ["0|r0", "0|r180", "0|r270"] and box.variant == {"rot": 270, "task": "grounding"}


def test_no_hint_column_means_no_hint_line(tmp_path):
    _official_set(tmp_path / "off")
    _, qs = _queries(tmp_path / "off")
    assert qs["2|r0"].prompt_text().startswith("Question: Where is the white block? (#2)\nOptions:\nA. left\n")


def test_official_images_go_as_stored_custom_sets_are_standardised(tmp_path):
    stored = _official_set(tmp_path / "off")
    _, qs = _queries(tmp_path / "off", td_image_size=256)  # --td-image-size is for sets evalkit rotates
    pipeline = ImagePipeline()
    try:
        for q in (qs["4|r180"], qs["g1|r90"]):
            part = q.image_parts()[0]
            assert part.transform.is_identity()
            sent = pipeline.prepare(part)
            assert sent.data in stored and sent.mime == "image/jpeg"
        assert qs["g1|r90"].meta["image_size"] == (96, 64)  # robust mode reads pixel boxes in it
    finally:
        pipeline.close()
    gen = tmp_path / "gen"
    gen.mkdir()
    Image.open(io.BytesIO(_jpeg(1))).save(gen / "a.png")
    (gen / "set.jsonl").write_text(json.dumps({"id": "1", "image": "a.png", "category": "Object Presence",
                                               "question": "Is there a block?", "options": ["Yes", "No"],
                                               "answer": "A"}) + "\n")
    _, custom = _queries(gen / "set.jsonl")
    assert custom["1|r90"].image_parts()[0].transform.size == (512, 512)
    _, custom = _queries(gen / "set.jsonl", td_image_size=0)
    assert custom["1|r90"].image_parts()[0].transform.size is None


# ---------------------------------------------------------------------------------------
# reading answers and extractor replies
# ---------------------------------------------------------------------------------------


def test_modes_read_the_disagreement_shapes_differently(tmp_path):
    _official_set(tmp_path / "off")
    bench, qs = _queries(tmp_path / "off")
    q = qs["1|r0"]  # options left/right/top/bottom, gold B
    cases = {  # reply: (official answer and method, robust answer)
        "答案：A": ((None, "unparsed"), "A"),
        "Option-D": ((None, "unparsed"), "D"),
        "<think>It could be A.</think>B": (("A", "rule"), "B"),  # official reads the thinking, as VLMEvalKit
        "A red block is visible on the right.": (("A", "rule"), "B"),
        "The answer is (C)": (("C", "rule"), "C"),
        "right": (("B", "rule"), "B"),
        "Sorry, I can't help with images of people yet.": ((None, "refusal"), None),
        "": ((None, "unparsed"), None),  # VLMEvalKit hands an empty reply to its extractor too
    }
    for reply, ((answer, method), robust) in cases.items():
        got = bench.parse(q, reply, "official")
        assert (got.answer, got.method) == (answer, method), reply
        assert bench.parse(q, reply, "robust").answer == robust, reply
    g = qs["g0|r0"]
    assert bench.parse(g, "[0.1, 0.2, 0.3, 0.4]", "official").answer == "[0.1, 0.2, 0.3, 0.4]"
    for reply in ("[12, 40, 60, 50]", "0.1 0.2 0.3 0.4", "x1=0.1, y1=0.2, x2=0.3, y2=0.4",
                  "[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.6, 0.6]"):
        official, robust = bench.parse(g, reply, "official"), bench.parse(g, reply, "robust")
        assert official.answer is None and bench.score(g, official) is False, reply
        assert robust.answer is not None, reply
    latest = TDBench()
    _, qs_latest = _queries(tmp_path / "off", td_parser="latest")
    assert latest.parse(qs_latest["1|r0"], "The correct answer is **B**. Not A.", "official").answer == "B"
    assert bench.parse(q, "The correct answer is **B**. Not A.", "official").answer is None


def test_extractor_request_and_reply_by_mode(tmp_path):
    _official_set(tmp_path / "off")
    bench, qs = _queries(tmp_path / "off")
    q = qs["1|r0"]
    reply = "<think>left or right</think>the one on the east side"
    official = bench.judge_request(q, reply, mode="official")
    assert official is not None and official.valid == ("A", "B", "C", "D")
    assert official.prompt.endswith("Example 3: \nQuestion: Where is the white block? (#1)?\nOptions: There are "
                                    "several options: \nA. left\nB. right\nC. top\nD. bottom\n\nAnswer: "
                                    f"{reply}\nYour output: ")
    robust = bench.judge_request(q, reply, mode="robust")
    assert robust is not None and "<think>" not in robust.prompt and "the one on the east side" in robust.prompt
    assert bench.judge_request(qs["g0|r0"], "somewhere", mode="official") is None
    verdict = {r: bench.judge_verdict(q, reply, r, official.valid, "official") for r in ("B", "B.", "Z", "A or B", "")}
    assert verdict["B"].answer == "B" and verdict["B"].method == "llm" and verdict["B."].answer == "B"
    for r in ("Z", "A or B", ""):  # VLMEvalKit would retry, then pick at random: evalkit keeps it unparsed
        assert (verdict[r].answer, verdict[r].method) == (None, "llm_unresolved")


# ---------------------------------------------------------------------------------------
# VLMEvalKit's RotationalEval table
# ---------------------------------------------------------------------------------------


def _outcomes(table: dict[str, dict[str, dict[int, bool]]]) -> list[RotationOutcome]:
    return [RotationOutcome(p, cat, rot, ok) for cat, probs in table.items() for p, rots in probs.items()
            for rot, ok in rots.items()]


def test_vlmevalkit_average_row():
    right, wrong = dict.fromkeys((0, 90, 180, 270), True), dict.fromkeys((0, 90, 180, 270), False)
    outcomes = _outcomes({
        "Object Counting": {"p1": right, "p2": {0: True, 90: True, 180: False, 270: False}, "p3": wrong},
        "Scene Understanding": {"p4": right, "p5": {0: True, 90: False, 180: False, 270: False},
                                "p6": {0: True, 90: True, 180: True}},  # not in every rotation: left out
    })
    table = vlmevalkit_table(outcomes, (0, 90, 180, 270))
    assert table["per_category"]["Object Counting"] == pytest.approx(
        {"total_questions": 3, "hit_all": 1 / 3, "miss_all": 1 / 3, "rot0": 2 / 3, "rot90": 2 / 3,
         "rot180": 1 / 3, "rot270": 1 / 3})
    assert table["per_category"]["Scene Understanding"]["total_questions"] == 2
    # the mean over the two categories, rounded to 3; 2.5 questions truncated to 2 as its astype(int) does
    assert table["average"] == {"total_questions": 2, "hit_all": 0.417, "miss_all": 0.167, "rot0": 0.833,
                                "rot90": 0.583, "rot180": 0.417, "rot270": 0.417}
    two = vlmevalkit_table(outcomes, (0, 90))
    # p6 now counts: (2/3 + 2/3) / 2
    assert two["average"]["rot180"] is None and two["average"]["hit_all"] == 0.667


# ---------------------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------------------


def test_official_run_end_to_end(tmp_path, monkeypatch, no_plots):
    stored = _official_set(tmp_path / "off", n=30, n_boxes=6)
    received: list[bytes] = []
    original = sim_state.decode_image

    def recording(b64: str):  # what the simulated server is sent, before it decodes anything
        received.append(base64.b64decode(b64))
        return original(b64)

    monkeypatch.setattr(sim_state, "decode_image", recording)
    data = tmp_path / "off"
    key = answer_key_for("tdbench", {"data": str(data)})
    with SimThread(SimConfig(answer_key=key, params=SimParams(theta=0.5, r=0.95, g=0.3, seed=4))) as sim:
        res = run("tdbench", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp_path / "run"),
                  no_cache=True, progress=False, concurrency=16, td_boot=1)
    assert res.exit_code == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["mode"] == "official" and s["n_queries"] == 4 * 36 and s["counts"]["errors"] == 0
    assert s["official_source"].startswith("open-compass/VLMEvalKit@3ba9220a")
    assert any("picks a random option" in d for d in s["deviations"])
    assert set(received) == set(stored)  # every picture exactly as the files store it, and only those
    m = s["metrics"]
    avg = m["vlmevalkit_average"]
    assert set(avg) == {"total_questions", "hit_all", "miss_all", "rot0", "rot90", "rot180", "rot270"}
    # recompute VLMEvalKit's Average from the records: categories of the MC file, grounding apart
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    per: dict[str, dict[str, dict[int, bool]]] = {}
    for r in records:
        if r["variant"].get("task") != "grounding":
            per.setdefault(r["category"], {}).setdefault(r["base_id"], {})[r["variant"]["rot"]] = r["correct"]
    assert sorted(per) == sorted(CATS)
    hit_all = [sum(all(p.values()) for p in c.values()) / len(c) for c in per.values()]
    rot90 = [sum(p[90] for p in c.values()) / len(c) for c in per.values()]
    assert avg["total_questions"] == 10 and avg["hit_all"] == round(sum(hit_all) / 3, 3)
    assert avg["rot90"] == round(sum(rot90) / 3, 3) and 0 < avg["hit_all"] < avg["rot90"] < 1
    assert "Visual Grounding" not in m["vlmevalkit_per_category"]
    assert m["grounding_vlmevalkit"]["total_questions"] == 6 and "all" in m["grounding"]
    assert set(m["per_category"]) == {*CATS, "Visual Grounding"}  # the paper's RE keeps all ten dimensions
    assert {"RE", "VE", "MA", "acc@0", "reliability"} <= set(m)
