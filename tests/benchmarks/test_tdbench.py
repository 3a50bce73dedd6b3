"""TDBench: rotation protocol against geometry, loaders, grounding, both forms, estimators end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from synthetic_data import tdbench_set

from evalkit.benchmarks.readers.tdbench import export_official, join_canvas, load_generated
from evalkit.benchmarks.tdbench import TDBench, parse_official_letter
from evalkit.benchmarks.tdbench_boxes import parse_box
from evalkit.core.errors import EvalkitError
from evalkit.engine.evaluate import run
from evalkit.images.pipeline import ImagePipeline
from evalkit.metrics.tdbench import centre_in_box, iou
from evalkit.protocols import rotation as rot
from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.model import SimParams
from evalkit.sim.server import SimConfig, SimThread

# ---------------------------------------------------------------------------------------
# protocol
# ---------------------------------------------------------------------------------------


def test_direction_words_follow_a_counter_clockwise_turn():
    # turning the picture a quarter to the left: what was on the right is now at the top
    assert [rot.render("<dir:right>", d) for d in rot.ROTATIONS] == ["right", "top", "left", "bottom"]
    assert [rot.render("<dir:top-left>", d) for d in rot.ROTATIONS] == [
        "top-left", "bottom-left", "bottom-right", "top-right"]
    assert rot.render("<Dir:bottom> of <cell:1,3> / <cellname:1,3>", 90) == "Right of row 1, column 1 / top-left"
    assert rot.rotate_box((0.1, 0.2, 0.3, 0.5), 90) == pytest.approx((0.2, 0.7, 0.5, 0.9))
    with pytest.raises(rot.PlaceholderError):
        rot.render("<dir:north>", 0)
    with pytest.raises(rot.PlaceholderError):
        rot.validate("<cell:4,1>")


def test_shuffle_moves_gold_and_is_seeded():
    opts = {"A": "cat", "B": "dog", "C": "cow", "D": "hen"}
    shown, gold = rot.shuffle_options(opts, "C", 0, "q1|r90")
    assert shown[gold] == "cow" and sorted(shown.values()) == sorted(opts.values())
    assert rot.shuffle_options(opts, "C", 0, "q1|r90") == (shown, gold)
    perms = {tuple(rot.shuffle_options(opts, "C", s, "q1|r90")[0].values()) for s in range(20)}
    assert len(perms) > 5


def _marker_image(row: int, col: int, size: int = 60) -> Image.Image:
    img = Image.new("RGB", (size, size), (30, 120, 40))
    step = size // 3
    d = ImageDraw.Draw(img)
    x0, y0 = (col - 1) * step + 5, (row - 1) * step + 5
    d.rectangle((x0, y0, x0 + step - 10, y0 + step - 10), fill=(255, 0, 0))
    d.rectangle((0, 0, 3, 3), fill=(0, 0, 255))  # an asymmetric corner so rotations differ
    return img


def _marker_cell(img: Image.Image) -> tuple[int, int]:
    a = np.asarray(img.convert("RGB")).astype(int)
    red = (a[:, :, 0] > 180) & (a[:, :, 1] < 80) & (a[:, :, 2] < 80)
    ys, xs = np.nonzero(red)
    h, w = red.shape
    return int(ys.mean() * 3 // h) + 1, int(xs.mean() * 3 // w) + 1


def test_rotation_geometry_for_every_grid_cell(tmp_path):
    lines = []
    for row in range(1, 4):
        for col in range(1, 4):
            _marker_image(row, col).save(tmp_path / f"c{row}{col}.png")
            others = [(r, c) for r in range(1, 4) for c in range(1, 4) if (r, c) != (row, col)][:3]
            lines.append({"id": f"c{row}{col}", "image": f"c{row}{col}.png", "category": "Object Localization",
                          "question": f"Which cell of the 3x3 grid holds the red marker? (now: <cell:{row},{col}>)",
                          "options": [f"<cellname:{row},{col}>", *(f"<cellname:{r},{c}>" for r, c in others)],
                          "answer": "A"})
    (tmp_path / "set.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    bench = TDBench()
    items = bench.load(tmp_path / "set.jsonl", None, {})
    queries = list(bench.expand(items, {"td_image_size": 0}))
    assert len(queries) == 36
    pipe = ImagePipeline()
    try:
        for q in queries:
            img = Image.open(__import__("io").BytesIO(pipe.prepare(q.image_parts()[0]).data))
            cell = _marker_cell(img)
            assert rot.parse_cell_name(q.options[q.gold]) == cell, q.id  # gold names the marker's cell
            assert f"row {cell[0]}, column {cell[1]}" in q.prompt_text()
            assert q.variant == {"rot": int(q.id.split("|r")[1])} and q.base_id == q.id.split("|")[0]
    finally:
        pipe.close()


# ---------------------------------------------------------------------------------------
# prompt, parsing, grounding
# ---------------------------------------------------------------------------------------


def test_prompt_is_the_vlmevalkit_form(tmp_path):
    _marker_image(1, 1).save(tmp_path / "a.png")
    line = {"id": "1", "image": "a.png", "category": "Object Presence", "question": "Is there a car?",
            "options": ["Yes", "No"], "answer": "A", "shuffle": False}
    (tmp_path / "s.jsonl").write_text(json.dumps(line) + "\n")
    bench = TDBench()
    q = next(iter(bench.expand(bench.load(tmp_path / "s.jsonl", None, {}), {})))
    assert q.prompt_text() == ("Question: Is there a car?\nOptions:\nA. Yes\nB. No\n"
                               "Please select the correct answer from the options above. \n")
    assert q.image_parts()[0].transform.size == (512, 512)


def test_official_rule_parser():
    opts = {"A": "red car", "B": "blue car", "C": "bus"}
    assert parse_official_letter("B", opts) == "B"
    assert parse_official_letter("The answer is (C).", opts) == "C"
    assert parse_official_letter("I think it is the blue car.", opts) == "B"
    assert parse_official_letter("A or B", opts) is None
    assert parse_official_letter("no idea", opts) is None


@pytest.mark.parametrize(
    ("text", "size", "box"),
    [
        ("[0.1, 0.2, 0.5, 0.6]", None, (0.1, 0.2, 0.5, 0.6)),
        ("The car is at [0.5, 0.6, 0.1, 0.2].", None, (0.1, 0.2, 0.5, 0.6)),  # reversed corners
        ("x1=0.1, y1=0.2, x2=0.5, y2=0.6", None, (0.1, 0.2, 0.5, 0.6)),  # labels are not numbers
        ("(51.2, 102.4, 256, 307.2)", (512, 512), (0.1, 0.2, 0.5, 0.6)),  # pixels, size known
        ("Box: [51, 102, 256, 307] (confidence 0.9)", (512, 512), (51 / 512, 102 / 512, 0.5, 307 / 512)),
        ("[51, 102, 256, 307]", None, None),  # pixels, size unknown
        ("0.4", None, None),  # one number
        ("[0.1, 0.2, 0.3]", None, None),
        ("somewhere top-left", None, None),
        ("[1200, 10, 1300, 40]", (512, 512), None),  # outside the image
    ],
)
def test_parse_box(text, size, box):
    got = parse_box(text, size)
    assert got == (pytest.approx(box) if box else None)


def test_iou_and_centre_golden():
    assert iou((0, 0, 0.5, 0.5), (0, 0, 0.5, 0.5)) == 1.0
    assert iou((0, 0, 0.5, 0.5), (0.25, 0.25, 0.75, 0.75)) == pytest.approx(0.0625 / 0.4375)
    assert iou((0, 0, 0.2, 0.2), (0.5, 0.5, 0.7, 0.7)) == 0.0
    assert centre_in_box((0.3, 0.3, 0.5, 0.5), (0.35, 0.35, 0.45, 0.45))
    assert not centre_in_box((0.0, 0.0, 0.2, 0.2), (0.35, 0.35, 0.45, 0.45))
    bench = TDBench()
    q = type("Q", (), {"meta": {"task": "grounding", "image_size": (512, 512), "criterion": "center"},
                       "gold": "[0.1, 0.1, 0.3, 0.3]"})()
    # (reply, right in robust mode, right in official mode): official reads relative `a, b, c, d` only
    for reply, robust, official in (("[0.15, 0.15, 0.25, 0.25]", True, True), ("[102, 102, 51, 51]", True, False),
                                    ("[0.25, 0.25, 0.15, 0.15]", True, True),  # reversed: same centre
                                    ("[0.5, 0.5, 0.9, 0.9]", False, False), ("0.2", False, False)):
        for mode, ok in (("robust", robust), ("official", official)):
            parsed = bench.parse(q, reply, mode)  # type: ignore[arg-type]
            assert bool(bench.score(q, parsed)) is ok, (reply, mode)  # type: ignore[arg-type]


def test_join_canvas_halves():
    a, b = Image.new("RGB", (40, 30), "red"), Image.new("RGB", (10, 90), "blue")
    h = join_canvas([a, b], "h", 64)
    assert h.size == (64, 64) and h.getpixel((10, 10)) == (255, 0, 0) and h.getpixel((50, 50)) == (0, 0, 255)
    v = join_canvas([a, b], "v", 64)
    assert v.getpixel((50, 10)) == (255, 0, 0) and v.getpixel((10, 50)) == (0, 0, 255)


# ---------------------------------------------------------------------------------------
# official loader errors
# ---------------------------------------------------------------------------------------


def test_official_files_errors(tmp_path):
    src = tdbench_set(tmp_path / "gen", 8)
    out = tmp_path / "off"
    export_official(load_generated(src), out, size=64)
    bench = TDBench()
    items = bench.load(out, None, {})
    assert len(items) == 8 and sorted(items[0].meta["variants"]) == [0, 90, 180, 270]
    # an index missing in one rotation file
    lines = (out / "tdbench_rot180.tsv").read_text().splitlines()
    (out / "tdbench_rot180.tsv").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(EvalkitError, match="missing from this rotation file"):
        bench.load(out, None, {})
    (out / "tdbench_rot180.tsv").write_text("\n".join(lines) + "\n")
    # unknown category
    text = (out / "tdbench_rot90.tsv").read_text()
    (out / "tdbench_rot90.tsv").write_text(text.replace("Object Presence", "Weather Guessing"))
    with pytest.raises(EvalkitError, match="unknown category 'Weather Guessing'"):
        bench.load(out, None, {})
    (out / "tdbench_rot90.tsv").write_text(text)
    # unknown box format
    g = (out / "tdbench_grounding_rot0.tsv").read_text()
    (out / "tdbench_grounding_rot0.tsv").write_text(g.replace("[0, 0, 0.1, 0.1]", "{'x': 1}"))
    with pytest.raises(EvalkitError, match="unknown box format"):
        bench.load(out, None, {})


# ---------------------------------------------------------------------------------------
# end to end through the simulated server
# ---------------------------------------------------------------------------------------


def _run(tmp: Path, data: Path, params: SimParams, name: str, **opts) -> dict:
    key = answer_key_for("tdbench", {"data": str(data), **opts})
    with SimThread(SimConfig(answer_key=key, params=params)) as sim:
        res = run("tdbench", "vllm/sim-model", data=str(data), base_url=sim.url, out=str(tmp / name),
                  no_cache=True, progress=False, concurrency=64, **opts)
    assert res.exit_code == 0
    return res.summary


@pytest.mark.slow
def test_generated_and_official_forms_give_identical_metrics(tmp_path, no_plots):
    src = tdbench_set(tmp_path / "gen", 120, seed=3)
    export_official(load_generated(src), tmp_path / "off", size=64)
    params = SimParams(theta=0.6, r=0.95, g=0.3, seed=5)
    # td_boot 200: the report's reliability fit bootstraps the same histogram 200 times with the same
    # seed, so the aggregate's fit is that one (memoised), not 50 more resamples beside it
    a = _run(tmp_path, src, params, "a", td_image_size=64, td_boot=200)
    b = _run(tmp_path, tmp_path / "off", params, "b", td_image_size=64, td_boot=200)
    assert a["n_queries"] == b["n_queries"] == 480
    assert a["metrics"] == b["metrics"]
    assert a["counts"] == b["counts"]
    m = a["metrics"]
    assert 0.1 < m["RE"] < m["VE"] < 0.95 and m["MA"] > 0  # a non-trivial model
    assert set(m["per_category"]) >= {"Visual Grounding", "Dynamic Temporal", "Spatial Relationship"}


@pytest.mark.slow
def test_estimators_end_to_end_500_problems(tmp_path, no_plots):
    src = tdbench_set(tmp_path / "gen", 500, seed=11, size=24, unique_text=True, pairs=False, grounding=False)
    params = SimParams(theta=0.7, r=0.95, g=0.25, seed=2)
    s = _run(tmp_path, src, params, "e2e", td_image_size=0, td_boot=200)
    assert s["n_queries"] == 2000 and s["counts"]["errors"] == 0
    ml = s["metrics"]["reliability_ml"]
    counts = s["metrics"]["per_category"]
    pooled = {k: sum(c[k] * c["n"] for c in counts.values()) / 500 for k in ("RE", "VE", "MA")}
    from evalkit.metrics.moments import decompose

    paper = decompose(pooled["RE"], pooled["VE"], pooled["MA"])
    assert paper is not None
    for est in (ml, paper._asdict()):
        assert abs(est["theta"] - 0.7) < 0.06, est
        assert abs(est["r"] - 0.95) < 0.06, est
        assert abs(est["g"] - 0.25) < 0.06, est


def test_bundled_sample_loads():
    bench = TDBench()
    from evalkit.core.resources import dataset_path

    items = bench.load(dataset_path("tdbench"), None, {})
    assert len(items) == 30 and len({it.category for it in items}) == 10
    queries = list(bench.expand(items, {}))
    assert len(queries) == 120 and len({q.id for q in queries}) == 120


# ---------------------------------------------------------------------------------------
# case-study tools
# ---------------------------------------------------------------------------------------


def _boxed_set(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (x, y, bw, bh) in enumerate([(100, 80, 20, 20), (370, 10, 24, 16), (5, 250, 30, 30), (200, 150, 41, 27)]):
        img = Image.new("RGB", (400, 300), (60, 130, 60))
        ImageDraw.Draw(img).rectangle((x, y, x + bw - 1, y + bh - 1), fill=(250, 0, 0))
        img.save(folder / f"{i}.png")
        lines.append({"id": str(i), "image": f"{i}.png", "task": "grounding", "category": "Visual Grounding",
                      "question": "red car", "box": [x / 400, y / 300, (x + bw) / 400, (y + bh) / 300]})
    (folder / "set.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder / "set.jsonl"


def _red_share(path: Path) -> tuple[float, int]:
    a = np.asarray(Image.open(path).convert("RGB")).astype(int)
    red = (a[:, :, 0] > 200) & (a[:, :, 1] < 50)
    return red.mean(), int(red.sum())


def test_derive_magnify_area_ratio(tmp_path):
    from evalkit.cli import main

    src = _boxed_set(tmp_path / "src")
    assert main(["derive", "magnify", "--data", str(src), "--out", str(tmp_path / "mag"), "--area-ratio", "0.02"]) == 0
    lines = [json.loads(x) for x in (tmp_path / "mag" / "set.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    for line in lines:
        share, _ = _red_share(tmp_path / "mag" / line["image"])
        assert abs(share - 0.02) <= 0.002, (line, share)  # measured on the crop's pixels
        assert abs(line["area_ratio"] - 0.02) <= 0.002
        assert line["question"] == "Is there a red car in the image?"


def test_derive_integrity_share(tmp_path):
    from evalkit.cli import main

    src = _boxed_set(tmp_path / "src")
    assert main(["derive", "integrity", "--data", str(src), "--out", str(tmp_path / "int"), "--integrity", "0.6",
                 "--scale", "25"]) == 0
    lines = [json.loads(x) for x in (tmp_path / "int" / "set.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    boxes = {str(i): bw * bh for i, (bw, bh) in enumerate([(20, 20), (24, 16), (30, 30), (41, 27)])}
    for line in lines:
        _, visible = _red_share(tmp_path / "int" / line["image"])
        assert abs(visible / boxes[line["id"]] - 0.6) <= 0.02, (line, visible)
        assert abs(line["integrity"] - 0.6) <= 0.02
        w, h = Image.open(tmp_path / "int" / line["image"]).size
        assert abs(w * h / boxes[line["id"]] - 25) < 1.5  # fixed size: 25x the box area


def test_mcq_rotations_flag(tmp_path):
    src = tdbench_set(tmp_path / "gen", 4, pairs=False, grounding=False)
    from evalkit.benchmarks.mcq import MCQ

    bench = MCQ()
    queries = list(bench.expand(bench.load(src, None, {}), {"rotations": 4}))
    assert [q.variant["rot"] for q in queries[:4]] == [0, 90, 180, 270]
    assert [q.image_parts()[0].transform.rotate for q in queries[:4]] == [0, 90, 180, 270]
    assert queries[1].options[queries[1].gold] == "bottom-left"  # top-left after a quarter turn left


def test_derive_writes_only_inside_out_whatever_the_ids(tmp_path):
    from evalkit.cli import main

    src = _boxed_set(tmp_path / "src")
    hostile = [str(tmp_path / "abs-target"), "../escaped", "a/b", ".hidden"]
    rows = [json.loads(x) for x in src.read_text().splitlines()]
    for row, new_id in zip(rows, hostile, strict=True):
        row["id"] = new_id
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "deep" / "out"
    assert main(["derive", "magnify", "--data", str(src), "--out", str(out)]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    lines = [json.loads(x) for x in (out / "set.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == hostile  # ids are kept as data
    assert written == sorted(["set.jsonl", *(x["image"] for x in lines)]) and all("/" not in x["image"] for x in lines)
    assert len({x["image"] for x in lines}) == 4 and not any(p.name.startswith(".") for p in out.iterdir())
    outside = [p for p in tmp_path.rglob("*_magnify.png") if out not in p.parents]
    assert outside == []
