"""MME-RealWorld's base64 release read from a Hub-snapshot-shaped folder: the parts of each language
in part order, the Lite TSV (with or without A-E columns), images left in the file as spans whose
bytes and cache identity are those of the same picture as base64 text, errors naming part and
record, and memory that does not grow with the size of a part."""

from __future__ import annotations

import base64
import io
import json
import tracemalloc
from pathlib import Path

import pytest
from synthetic_data import draw_image

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.readers.mmerealworld import load_base64_parts
from evalkit.core.errors import EvalkitError
from evalkit.core.types import ImagePart, ImageRef, Transform
from evalkit.images.pipeline import ImagePipeline

TASKS = [("Perception/OCR with Complex Context", "license"), ("Reasoning/Remote Sensing", "position"),
         ("Perception/Monitoring", "Person/attribute/color"), ("Perception/Autonomous_Driving", "Objects_Identify")]


def _b64(seed: int) -> str:
    buf = io.BytesIO()
    draw_image(seed, 48).save(buf, "JPEG" if seed % 2 else "PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _record(index: int, *, cn: bool = False) -> dict:
    category, l2 = TASKS[index % len(TASKS)]
    word = "图中有几个圆形？" if cn else f"How many discs are in picture {index}?"
    return {"index": index, "image": _b64(index), "question": word,
            "multi-choice options": [f"({x}) {n + index}" for n, x in enumerate("ABCDE")],
            "answer": "ABCDE"[index % 5], "category": category, "l2-category": l2}


def _tsv(path: Path, records: list[dict], *, letters: bool) -> None:
    head = ["index", "image", "question", "multi-choice options", *("ABCDE" if letters else ""), "answer",
            "category", "l2-category"]
    lines = ["\t".join(head)]
    for r in records:
        options = [o.split(") ", 1)[1] for o in r["multi-choice options"]] if letters else []
        lines.append("\t".join([str(r["index"]), r["image"], r["question"], repr(r["multi-choice options"]),
                                *options, r["answer"], r["category"], r["l2-category"]]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _snapshot(root: Path) -> dict[str, list[dict]]:
    """Two English parts (numbered 2 and 10: number order is not name order), one Chinese part and a
    Lite TSV. Part 10 escapes every "/" as JSON allows ("\\/"), the Chinese part is pretty-printed."""
    en, cn = root / "MME-RealWorld", root / "MME-RealWorld-CN"
    en.mkdir(parents=True)
    cn.mkdir()
    parts = {"en2": [_record(i) for i in (6, 5)], "en10": [_record(i) for i in (11, 12)],
             "cn0": [_record(i, cn=True) for i in (100, 101)], "lite": [_record(i) for i in (20, 21, 22)]}
    (en / "MME_RealWorld_base64_10.json").write_text(json.dumps(parts["en10"]).replace("/", "\\/"))
    (en / "MME_RealWorld_base64_2.json").write_text(json.dumps(parts["en2"]))
    (cn / "MME_RealWorld_CN_base64_0.json").write_text(json.dumps(parts["cn0"], ensure_ascii=False, indent=4),
                                                       encoding="utf-8")
    _tsv(root / "mme_realworld_lite.tsv", parts["lite"], letters=False)
    return parts


def _load(data: Path, **options):
    return get_benchmark("mme-realworld").load(data, None, options)


def test_full_english_parts_in_part_order(tmp_path):
    parts = _snapshot(tmp_path)
    items = _load(tmp_path)  # --mme-set full and --mme-lang auto are the defaults
    expected = parts["en2"] + parts["en10"]
    assert [it.id for it in items] == ["6", "5", "11", "12"]
    for it, rec in zip(items, expected, strict=True):
        assert it.options == {x: str(n + rec["index"]) for n, x in enumerate("ABCDE")}
        assert it.answer == rec["answer"] and it.question == rec["question"] and it.meta["lang"] == "en"
        assert it.images[0].kind == "span"
        assert base64.b64encode(ImagePipeline().source_bytes(it.images[0])).decode() == rec["image"]
    assert [it.category for it in items] == ["Perception/MO/person/attribute", "Reasoning/RS/position",
                                             "Perception/AD/objects_identify", "Perception/OCR/license"]
    assert items[1].meta["task"] == "Reasoning" and items[1].meta["subtask"] == "Remote Sensing"
    assert _load(tmp_path / "MME-RealWorld")[2].id == "11"  # the parts folder itself, as the registry's root


def test_chinese_parts_and_the_lite_tsv(tmp_path):
    parts = _snapshot(tmp_path)
    cn = _load(tmp_path, mme_lang="cn")
    assert [(it.id, it.meta["lang"]) for it in cn] == [("100", "cn"), ("101", "cn")]
    assert [it.meta["lang"] for it in _load(tmp_path / "MME-RealWorld-CN")] == ["cn", "cn"]  # auto, by folder
    assert next(iter(get_benchmark("mme-realworld").expand(cn[:1], {}))).prompt_text().endswith("最佳答案为：")

    lite = _load(tmp_path, mme_set="lite")
    assert [it.id for it in lite] == ["20", "21", "22"]
    assert lite[1].options == {x: str(n + 21) for n, x in enumerate("ABCDE")} and lite[1].answer == "B"
    assert lite[1].category == "Reasoning/RS/position" and lite[0].images[0].kind == "span"
    with_letters = tmp_path / "letters"
    with_letters.mkdir()
    _tsv(with_letters / "mme_realworld_lite.tsv", parts["lite"], letters=True)
    assert [(it.options, it.answer) for it in _load(with_letters, mme_set="lite")] == \
        [(it.options, it.answer) for it in lite]
    (tmp_path / "mme_realworld_lite.tsv").unlink()
    with pytest.raises(EvalkitError, match="no mme_realworld_lite.tsv for --mme-set lite"):
        _load(tmp_path, mme_set="lite")
    for part in (tmp_path / "MME-RealWorld").iterdir():
        part.unlink()
    with pytest.raises(EvalkitError, match=r"no base64 parts in MME-RealWorld/ .*MME-RealWorld-CN/ is there "
                                           r"\(--mme-lang cn\)"):
        _load(tmp_path)


def test_the_option_is_a_protocol_flag():
    cls = get_benchmark("mme-realworld").Options
    field = cls.__dataclass_fields__["mme_set"]
    assert field.default == "full" and field.metadata["role"] == "identity"
    assert field.metadata["choices"] == ("full", "lite")


def test_span_and_b64_refs_of_one_picture_are_one_image(tmp_path):
    parts = _snapshot(tmp_path)
    span = _load(tmp_path)[2].images[0]  # from the part that escapes "/" as "\/"
    b64 = ImageRef.from_b64(parts["en10"][0]["image"])
    one, two = ImagePipeline(), ImagePipeline()
    assert one.source_bytes(span) == two.source_bytes(b64)
    assert one.source_hash(span) == two.source_hash(b64)  # the cache key's image identity
    for t in (Transform(), Transform(max_side=20, fmt="JPEG")):
        assert one.prepare(ImagePart(span, t)).data == two.prepare(ImagePart(b64, t)).data
    assert one.fingerprint(ImagePart(span)) == two.fingerprint(ImagePart(b64))
    assert one.header(span) == two.header(b64)
    assert hash(span) == hash(ImageRef(span.kind, span.value)) and "bytes" in span.describe()


def test_bad_records_name_the_part_and_the_record(tmp_path):
    _snapshot(tmp_path)
    part = tmp_path / "MME-RealWorld" / "MME_RealWorld_base64_10.json"
    good = json.loads(part.read_text())
    for mutate, message in [
        (lambda d: d[1].pop("answer"), r"base64_10.json: record 2 \(index 12\): missing answer"),
        (lambda d: d[0].__setitem__("image", None), r"record 1 \(index 11\): 'image' is not a base64 string"),
        (lambda d: d[1].__setitem__("multi-choice options", ["(A) 1"]), r"record 2 .*'multi-choice options' must"),
        (lambda d: d[1].__setitem__("index", 5), r"record 2 \(index 5\): duplicate index \(first at "
                                                 r"MME_RealWorld_base64_2.json record 2\)"),
    ]:
        bad = json.loads(json.dumps(good))
        mutate(bad)
        part.write_text(json.dumps(bad))
        with pytest.raises(EvalkitError, match=message):
            _load(tmp_path)
    text = json.dumps(good)
    part.write_text(text[:text.index(good[1]["image"]) + 100])  # cut inside the second record's image
    with pytest.raises(EvalkitError, match=r"base64_10.json: record 2: a string is never closed at byte \d+"):
        _load(tmp_path)
    got = get_benchmark("mme-realworld").load_lenient(tmp_path, None, {})  # lint: the other part still read
    assert [it.id for it in got.items] == ["6", "5", "11"] and len(got.problems) == 1


def test_lint_takes_byte_identical_inline_copies_for_one_picture(tmp_path):
    """Each base64 record carries its own copy of its picture: copies are one image to lint; the same
    picture encoded otherwise is still a near-duplicate."""
    from evalkit.lint.engine import check_items

    buf = io.BytesIO()
    draw_image(5, 48).save(buf, "JPEG", quality=60)
    records = [_record(i) for i in range(4)]
    records[1]["image"] = records[0]["image"] = _b64(5)
    records[2]["image"] = base64.b64encode(buf.getvalue()).decode("ascii")
    folder = tmp_path / "MME-RealWorld"
    folder.mkdir()
    (folder / "MME_RealWorld_base64_0.json").write_text(json.dumps(records))
    findings, _ = check_items("mme-realworld", _load(tmp_path))
    pairs = [f.items for f in findings if f.kind == "image-near-duplicate"]
    assert sorted(pairs) == [("0", "2"), ("1", "2")]


def test_loading_a_big_part_holds_no_image(tmp_path):
    """A 200 MB part (200 records of 1 MB of base64 each) loads within a few MB of Python memory."""
    path = tmp_path / "MME_RealWorld_base64_0.json"
    image = base64.b64encode(b"\xff\xd8" + bytes(749_998)).decode("ascii")
    with path.open("w", encoding="ascii") as fh:
        fh.write("[")
        for i in range(200):
            rec = _record(i)
            rec["image"] = image
            fh.write(("," if i else "") + json.dumps(rec))
        fh.write("]")
    assert path.stat().st_size > 200_000_000
    tracemalloc.start()
    try:
        items = load_base64_parts([path])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(items) == 200 and items[-1].images[0].span()[2] - items[-1].images[0].span()[1] == len(image)
    assert peak < 50 * 2**20, f"peak {peak / 2**20:.1f} MB"
