"""The generic MCQ benchmark: both file forms, image references, clear errors, prompt, parse."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from evalkit.benchmarks import REGISTRY, benchmark_class, get_benchmark, list_benchmarks
from evalkit.benchmarks.mcq import MCQ
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.resources import dataset_path, prompt_path, read_prompt
from evalkit.core.types import ImagePart, TextPart

HEADER = ["index", "image", "question", "A", "B", "C", "D", "answer", "category"]


def png_b64(colour: tuple[int, int, int] = (255, 0, 0)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def write_tsv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def row(
    index: str, answer: str = "A", image: str | None = None, opts: tuple[str, ...] = ("x", "y", "z", "w")
) -> list[str]:
    return [index, png_b64() if image is None else image, f"Q{index}?", *opts, answer, "cat"]


# ---------------------------------------------------------------------------------------------
# registry and resources


def test_registry() -> None:
    assert benchmark_class("mcq") is MCQ and REGISTRY["mcq"].target == "evalkit.benchmarks.mcq:MCQ"
    assert "mcq" in list_benchmarks()
    assert isinstance(get_benchmark("mcq"), MCQ)
    with pytest.raises(EvalkitError, match=r"unknown benchmark 'nope' \(known: .*mcq"):
        get_benchmark("nope")


def test_resources_find_bundled_files() -> None:
    assert prompt_path("mcq", "default.txt").is_file()
    assert dataset_path("demo", "mcq.tsv").is_file()
    assert read_prompt("mcq", "default.txt").startswith("{hint}Question: {question}")
    with pytest.raises(EvalkitError, match="not found"):
        read_prompt("mcq", "no-such-prompt.txt")


# ---------------------------------------------------------------------------------------------
# loading


def test_demo_tsv_and_jsonl_agree() -> None:
    bench = MCQ()
    tsv = bench.load(dataset_path("demo", "mcq.tsv"), None, {})
    jsonl = bench.load(dataset_path("demo", "mcq.jsonl"), None, {})
    assert len(tsv) == len(jsonl) == 24
    assert {i.category for i in tsv} == {"colour", "counting", "position"}
    for a, b in zip(tsv, jsonl, strict=True):
        assert (a.id, a.question, a.options, a.answer, a.category) == (
            b.id,
            b.question,
            b.options,
            b.answer,
            b.category,
        )
    assert tsv[0].images[0].kind == "b64" and jsonl[0].images[0].kind == "path"
    # row 8 reuses row 2's image through its index
    assert tsv[8].images == tsv[2].images
    # the same question and options on different images, with different answers
    assert tsv[0].question == tsv[1].question and tsv[0].options == tsv[1].options
    assert tsv[0].answer != tsv[1].answer and tsv[0].images != tsv[1].images


def test_demo_images_decode() -> None:
    item = MCQ().load(dataset_path("demo", "mcq.tsv"), None, {})[0]
    img = Image.open(io.BytesIO(base64.b64decode(item.images[0].value)))
    assert img.size == (256, 256)


def test_tsv_image_reference_and_empty_options(tmp_path: Path) -> None:
    rows = [row("10", "B"), row("11", "A", image="10", opts=("yes", "no", "", ""))]
    items = MCQ().load(write_tsv(tmp_path / "d.tsv", rows), None, {})
    assert [i.id for i in items] == ["10", "11"]
    assert items[1].images == items[0].images
    assert items[1].options == {"A": "yes", "B": "no"}
    assert items[0].category == "cat"


def test_tsv_hint_extra_letters_and_image_path(tmp_path: Path) -> None:
    Image.new("RGB", (4, 4)).save(tmp_path / "pic.png")
    header = ["index", "image_path", "question", "A", "B", "C", "D", "E", "answer", "hint", "l2-category"]
    rows = [["1", "pic.png", "Q?", "a", "b", "c", "d", "e", "E", "look closely", "misc"]]
    (item,) = MCQ().load(write_tsv(tmp_path / "d.tsv", rows, header), None, {})
    assert item.answer == "E" and list(item.options) == ["A", "B", "C", "D", "E"]
    assert item.images[0].kind == "path" and Path(str(item.images[0].value)) == tmp_path / "pic.png"
    assert item.meta["hint"] == "look closely" and item.meta["l2-category"] == "misc"


def test_tsv_huge_base64_cell(tmp_path: Path) -> None:
    big = base64.b64encode(b"\0" * 400_000).decode()  # > csv's default field limit
    (item,) = MCQ().load(write_tsv(tmp_path / "d.tsv", [row("1", image=big)]), None, {})
    assert len(item.images[0].value) == len(big)


def test_data_folder_with_one_file(tmp_path: Path) -> None:
    write_tsv(tmp_path / "d.tsv", [row("1")])
    assert len(MCQ().load(tmp_path, None, {})) == 1


def test_jsonl_forms(tmp_path: Path) -> None:
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for name in ("a.png", "b.png"):
        Image.new("RGB", (4, 4)).save(imgs / name)
    lines = [
        {
            "id": 1,
            "image": "a.png",
            "question": "Q1",
            "options": ["p", "q", "r"],
            "answer": "c",
            "category": "k",
        },
        {
            "id": "2",
            "images": ["a.png", "b.png"],
            "question": "Q2",
            "options": {"A": "p", "B": "q"},
            "answer": "B",
        },
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    items = MCQ().load(path, imgs, {})
    assert (
        items[0].id == "1" and items[0].options == {"A": "p", "B": "q", "C": "r"} and items[0].answer == "C"
    )
    assert items[0].category == "k"
    assert [Path(str(r.value)).name for r in items[1].images] == ["a.png", "b.png"]


# ---------------------------------------------------------------------------------------------
# errors name the file and the row


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([row("1", answer="")], r"row 1 \(index 1\): no answer"),
        (
            [row("1"), row("2", answer="F")],
            r"row 2 \(index 2\): answer 'F' is not among the options A, B, C, D",
        ),
        ([row("1", answer="C", opts=("a", "b", "", ""))], r"row 1 \(index 1\): answer 'C' is not among"),
        ([row("1", opts=("", "", "", ""))], r"row 1 \(index 1\): no options"),
        ([row("1"), row("1")], r"row 2: duplicate index 1 \(first at row 1\)"),
        ([row("1", image="")], r"row 1 \(index 1\): no image"),
        (
            [row("1"), row("2", image="7")],
            r"row 2 \(index 2\): image refers to index 7, which is not in the file",
        ),
        ([row("1", image="2"), row("2", image="1")], r"row 2 \(index 2\): image references form a cycle"),
    ],
)
def test_tsv_errors(tmp_path: Path, rows: list[list[str]], message: str) -> None:
    path = write_tsv(tmp_path / "bad.tsv", rows)
    with pytest.raises(EvalkitError, match=rf"^{re.escape(str(path))}: {message}"):
        MCQ().load(path, None, {})


def test_tsv_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(EvalkitError, match=r"missing\.tsv: file not found"):
        MCQ().load(tmp_path / "missing.tsv", None, {})
    no_image = write_tsv(tmp_path / "noimg.tsv", [["1", "Q", "a", "A"]], ["index", "question", "A", "answer"])
    with pytest.raises(EvalkitError, match=r"noimg\.tsv: no 'image' or 'image_path' column"):
        MCQ().load(no_image, None, {})
    missing_file = write_tsv(
        tmp_path / "p.tsv",
        [["1", "gone.png", "Q", "a", "A"]],
        ["index", "image_path", "question", "A", "answer"],
    )
    with pytest.raises(EvalkitError, match=r"p\.tsv: row 1 \(index 1\): image file not found: .*gone\.png"):
        MCQ().load(missing_file, None, {})


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"id": "1", "image": "a.png", "question": "Q", "options": ["p", "q"]}, "no answer"),
        (
            {"id": "1", "image": "a.png", "question": "Q", "options": ["p", "q"], "answer": "D"},
            "answer 'D' is not among",
        ),
        ({"id": "1", "image": "a.png", "question": "Q", "options": {}, "answer": "A"}, "no options"),
        (
            {"id": "1", "question": "Q", "options": ["p"], "answer": "A"},
            r"no image \('image' path or 'images' list\)",
        ),
        (
            {"id": "1", "image": "nope.png", "question": "Q", "options": ["p"], "answer": "A"},
            "image file not found",
        ),
        ({"image": "a.png", "question": "Q", "options": ["p"], "answer": "A"}, "no 'id'"),
    ],
)
def test_jsonl_errors(tmp_path: Path, obj: dict, message: str) -> None:
    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    good = {"id": "0", "image": "a.png", "question": "Q", "options": ["p", "q"], "answer": "A"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(obj) + "\n", encoding="utf-8")
    with pytest.raises(EvalkitError, match=rf"^{re.escape(str(path))}: line 2: {message}"):
        MCQ().load(path, None, {})


def test_jsonl_duplicate_and_invalid(tmp_path: Path) -> None:
    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    good = json.dumps({"id": "0", "image": "a.png", "question": "Q", "options": ["p"], "answer": "A"})
    dup = tmp_path / "dup.jsonl"
    dup.write_text(f"{good}\n{good}\n", encoding="utf-8")
    with pytest.raises(EvalkitError, match=r"dup\.jsonl: line 2: duplicate id 0 \(first at line 1\)"):
        MCQ().load(dup, None, {})
    broken = tmp_path / "broken.jsonl"
    broken.write_text(f"{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(EvalkitError, match=r"broken\.jsonl: line 2: invalid JSON"):
        MCQ().load(broken, None, {})


# ---------------------------------------------------------------------------------------------
# expand, parse, aggregate


def test_expand_prompt_and_params(tmp_path: Path) -> None:
    header = [*HEADER, "hint"]
    rows = [row("1", "B") + ["be careful"], row("2", opts=("a", "b", "", "")) + [""]]
    items = MCQ().load(write_tsv(tmp_path / "d.tsv", rows, header), None, {})
    queries = list(MCQ().expand(items, {"max_tokens": 64, "max_side": 512}))
    q1, q2 = queries
    assert (q1.id, q1.item_id, q1.base_id, q1.variant, q1.gold) == ("1", "1", "1", {}, "B")
    assert q1.prompt_text() == (
        "Hint: be careful\nQuestion: Q1?\nOptions:\nA. x\nB. y\nC. z\nD. w\n"
        "Please select the correct answer from the options above."
    )
    assert (
        q2.prompt_text()
        == "Question: Q2?\nOptions:\nA. a\nB. b\nPlease select the correct answer from the options above."
    )
    (message,) = q1.messages
    assert message.role == "user"
    assert isinstance(message.parts[0], ImagePart) and isinstance(message.parts[-1], TextPart)
    assert message.parts[0].transform.max_side == 512
    assert q1.params.temperature == 0.0 and q1.params.max_tokens == 64
    assert q2.options == {"A": "a", "B": "b"}
    default = next(iter(MCQ().expand(items, {})))
    assert default.params.max_tokens == 1024


def test_parse_and_judge(tmp_path: Path) -> None:
    bench = MCQ()
    items = bench.load(write_tsv(tmp_path / "d.tsv", [row("1", "B")]), None, {})
    (q,) = bench.expand(items, {})
    assert bench.parse(q, "The answer is (B).", "official").answer == "B"
    assert bench.parse(q, "<think>long</think>y", "official").method == "rule"
    assert bench.parse(q, "<think>long</think>", "official").method == "empty"
    refused = bench.parse(q, "I'm sorry, I cannot help with that.", "robust")
    assert refused.answer is None and refused.method == "refusal" and refused.refusal
    assert bench.parse(q, "A or B", "official").method == "unparsed"
    assert bench.score(q, bench.parse(q, "B", "official")) is True
    assert bench.score(q, bench.parse(q, "C", "official")) is False
    req = bench.judge_request(q, "maybe the second one")
    assert req is not None and req.valid == ("A", "B", "C", "D")
    assert "Question: Q1?" in req.prompt and "A. x" in req.prompt and "maybe the second one" in req.prompt


def _rec(i: int, correct: bool | None, category: str, parsed: str | None = "A") -> Record:
    return Record(
        str(i), str(i), str(i), {}, "m", "k", "r", "A", parsed=parsed, correct=correct, category=category
    )


def test_aggregate() -> None:
    recs = [_rec(1, True, "x"), _rec(2, False, "x"), _rec(3, True, "y"), _rec(4, False, "y", parsed=None)]
    metrics = MCQ().aggregate(recs, {})
    assert metrics["accuracy"] == pytest.approx(50.0)
    assert metrics["per_category"] == {"x": pytest.approx(50.0), "y": pytest.approx(50.0)}
    assert metrics["n"] == 4
    assert MCQ().aggregate([_rec(1, True, "")], {})["per_category"] == {}
