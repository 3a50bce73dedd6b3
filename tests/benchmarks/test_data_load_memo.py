"""A JSONL set's image paths are checked once per distinct path (mcq_io.ImagePaths), with the same
refs and the same one-line errors as a check per row (issue 35 item 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.benchmarks.readers.mcq import load_jsonl
from evalkit.core.errors import EvalkitError


def write_set(folder, images):
    rows = [{"id": f"q{k}", "image": image, "question": f"Q{k}?", "options": ["a", "b"], "answer": "A"}
            for k, image in enumerate(images)]
    path = folder / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_shared_pictures_resolve_alike(tmp_path):
    (tmp_path / "img").mkdir()
    for name in ("a.jpg", "b.jpg"):
        (tmp_path / "img" / name).write_bytes(b"\xff\xd8\xff")
    items = load_jsonl(write_set(tmp_path, ["img/a.jpg", "img/a.jpg", "img/b.jpg", str(tmp_path / "img/a.jpg")]))
    values = [it.images[0].value for it in items]
    assert values == [str(tmp_path / "img/a.jpg")] * 2 + [str(tmp_path / "img/b.jpg"), str(tmp_path / "img/a.jpg")]


def test_a_missing_picture_names_its_first_row(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"\xff\xd8\xff")
    path = write_set(tmp_path, ["a.jpg", "gone.jpg", "gone.jpg"])
    with pytest.raises(EvalkitError) as err:
        load_jsonl(path)
    assert str(err.value) == f"{path}: line 2: image file not found: {tmp_path / 'gone.jpg'}"


def test_fingerprint_resolves_a_folder_once_as_path_resolve_does(tmp_path):
    from evalkit.rundir.identity import _Resolver

    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "y" / "img.jpg").write_bytes(b"1")
    (tmp_path / "img.jpg").write_bytes(b"2")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "link").symlink_to(tmp_path / "x" / "y")
    (tmp_path / "a" / "f.jpg").symlink_to(tmp_path / "img.jpg")
    resolve = _Resolver()
    for path in (tmp_path / "a" / "link" / "img.jpg", f"{tmp_path}/a/link/../img.jpg", tmp_path / "a" / "f.jpg",
                 tmp_path / "img.jpg", f"{tmp_path}//a/link/img.jpg", tmp_path / "gone" / "m.jpg", "rel.jpg"):
        assert resolve(path) == str(Path(path).resolve()), path


def test_plain_queries_share_their_settings_objects(tmp_path):
    from evalkit.benchmarks.mcq import MCQ
    from evalkit.core.types import GenParams, Transform

    (tmp_path / "a.jpg").write_bytes(b"\xff\xd8\xff")
    items = load_jsonl(write_set(tmp_path, ["a.jpg", "a.jpg"]))
    bench = MCQ()
    first, second = (list(bench.expand(items, {"max_side": 768, "max_tokens": 64})) for _ in range(2))
    params = {id(q.params) for q in first + second}
    transforms = {id(q.image_parts()[0].transform) for q in first + second}
    assert len(params) == 1 and len(transforms) == 1  # one object each: a request key reads it once
    assert first[0].params == GenParams(temperature=0.0, max_tokens=64)
    assert first[0].image_parts()[0].transform == Transform(max_side=768)
    odd = bench.make_query(items[0], {"max_side": [768]}, "text")  # unhashable: built for the query alone
    assert odd.image_parts()[0].transform.max_side == [768]
