"""`evalkit lint` without `--images` on a set whose pictures are elsewhere (issue 35 item 9).

It printed one "image-missing" line per picture (499 of them); many image files not found are now one
line naming how many, the folder they were looked for in and `--images`, while `--json` keeps every one.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

from rich.console import Console

from evalkit.lint.command import cmd_lint


def _pope(folder: Path, n: int) -> Path:
    folder.mkdir()
    lines = [json.dumps({"question_id": i, "image": f"val2014/COCO_{i:04d}.jpg", "text": "Is there a dog in the image?",
                         "label": "yes" if i % 2 else "no"}) for i in range(n)]
    (folder / "coco_pope_random.json").write_text("\n".join(lines) + "\n")
    return folder / "coco_pope_random.json"


def _lint(data: Path, *, as_json: bool = False, images: str | None = None) -> tuple[int, str]:
    out = io.StringIO()
    args = argparse.Namespace(bench="pope", data=str(data), images=images, json=as_json, cache_dir=None,
                              no_cache=True)
    code = cmd_lint(args, Console(file=out, width=100))
    return code, out.getvalue()


def test_many_missing_images_are_one_line_naming_the_folder_and_images(tmp_path):
    data = _pope(tmp_path / "pope", 12)
    code, text = _lint(data)
    missing = [line for line in text.splitlines() if "image-missing" in line]
    assert code == 1 and len(missing) == 1, text
    folder = str(tmp_path / "pope" / "val2014")
    assert f"12 of 12 image files not found, looked for under {folder}" in missing[0]
    assert "give --images DIR" in missing[0] and "[0, 1, 2, 3, 4, 5 +6]" in missing[0]
    assert "lint pope: 12 errors, 1 info in 12 items and 12 images" in text
    code, text = _lint(data, as_json=True)  # every one, for scripts
    findings = json.loads(text)["findings"]
    assert code == 1 and sorted(f["items"][0] for f in findings if f["kind"] == "image-missing") == \
        sorted(str(i) for i in range(12))


def test_with_images_the_line_names_that_folder_and_a_few_stay_one_by_one(tmp_path):
    data = _pope(tmp_path / "pope", 12)
    elsewhere = tmp_path / "coco"
    elsewhere.mkdir()
    _, text = _lint(data, images=str(elsewhere))
    missing = [line for line in text.splitlines() if "image-missing" in line]
    assert len(missing) == 1 and f"under {elsewhere}/val2014 (--images {elsewhere})" in missing[0]
    few = _pope(tmp_path / "few", 3)
    _, text = _lint(few)
    assert [line.split("image-missing")[1].strip() for line in text.splitlines() if "image-missing" in line] == \
        [f"val2014/COCO_{i:04d}.jpg: image file not found [{i}]" for i in range(3)]
