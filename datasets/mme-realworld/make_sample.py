"""Write the bundled MME-RealWorld sample in both official forms, with images drawn here.

Run from anywhere: `python datasets/mme-realworld/make_sample.py`. Deterministic (fixed seed),
so re-running leaves the files unchanged. Writes next to this script:

  MME_RealWorld.json      official JSON records (both "Question type" spellings, Dataset on some)
  MME_RealWorld_CN.json   a few records with Chinese text (the _CN file; Chinese prompt ending)
  MME_RealWorld.tsv       the same English records in VLMEvalKit TSV form (base64 images; a row
                          whose image repeats an earlier row's holds that row's index instead)
  images/<domain>/*.jpg   the drawn pictures (counted shapes on a coloured ground)

Each picture shows a known number of shapes of one colour, and its questions are answerable
from it (count, colour, "the image does not feature ..." as option E), in every domain and
both tasks; some categories are attribute categories that the official grouping merges.
Tests import `build_records` / `write_forms` to write bigger sets the same way.
"""

from __future__ import annotations

import base64
import csv
import json
import random
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

SEED = 20240826
COLOURS = {"red": (210, 40, 40), "blue": (40, 80, 210), "green": (40, 160, 70), "yellow": (230, 200, 30)}
CN_COLOURS = {"red": "红色", "blue": "蓝色", "green": "绿色", "yellow": "黄色"}
# (Task, Subtask as the official files spell it, Category, image folder, Dataset or None)
CELLS = [
    ("Perception", "OCR with Complex Context", "license", "ocr", None),
    ("Perception", "Remote Sensing", "count", "remote_sensing", "DOTA"),
    ("Perception", "Diagram and Table", "diagram", "diagram_and_table", None),
    ("Perception", "Monitoring", "Vehicle/counting", "monitoring_images", None),
    ("Perception", "Monitoring", "Person/attribute/color", "monitoring_images", None),
    ("Perception", "Monitoring", "Person/attribute/orientation", "monitoring_images", None),
    ("Perception", "Autonomous_Driving", "Objects_Identify", "AutonomousDriving", "nuScenes"),
    ("Reasoning", "OCR with Complex Context", "scene_understanding", "ocr", None),
    ("Reasoning", "Diagram and Table", "diagram", "diagram_and_table", None),
    ("Reasoning", "Monitoring", "Vehicle/attribute/intention", "monitoring_images", None),
    ("Reasoning", "Autonomous_Driving", "Intention", "AutonomousDriving", "nuScenes"),
]


def draw(path: Path, colour: str, count: int, seed: int, size: tuple[int, int]) -> None:
    """`count` non-overlapping `colour` discs on a seeded background, saved as JPEG."""
    rng = random.Random(seed)
    w, h = size
    img = Image.new("RGB", size, tuple(rng.randrange(150, 256) for _ in range(3)))
    d = ImageDraw.Draw(img)
    cols = max(1, int(count ** 0.5 + 0.999))
    r = min(w, h) // (3 * cols + 2)
    for k in range(count):
        cx = (k % cols + 1) * w // (cols + 1)
        cy = (k // cols + 1) * h // (cols + 2)
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=COLOURS[colour])
    d.rectangle((0, h - h // 12, w, h), fill=tuple(rng.randrange(0, 100) for _ in range(3)))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "JPEG", quality=85)


def build_records(n: int, *, seed: int = SEED, per_image: int = 2, cn: bool = False) -> list[dict[str, Any]]:
    """n records in the official shape; every `per_image` consecutive records share one picture.

    A record carries an extra "_draw" entry (colour, count, seed) that write_forms removes.
    """
    rng = random.Random(seed + (1 if cn else 0))
    out: list[dict[str, Any]] = []
    pic: dict[str, Any] = {}
    for i in range(n):
        task, subtask, category, folder, dataset = CELLS[(i // per_image) % len(CELLS)]
        if i % per_image == 0:
            pic = {"colour": rng.choice(list(COLOURS)), "count": rng.randrange(1, 10), "seed": seed + i,
                   "name": f"{folder}/img_{'cn_' if cn else ''}{i:05d}.jpg"}
        colour, count = pic["colour"], pic["count"]
        absent = rng.random() < 0.2  # ask about something the picture does not show: the answer is E
        ask = rng.choice([c for c in COLOURS if c != colour]) if absent else colour
        numbers = rng.sample([x for x in range(1, 40) if x != count], 4)
        if not absent:
            numbers[rng.randrange(4)] = count
        if cn:
            text = f"图中有多少个{CN_COLOURS[ask]}圆形？" if i % 2 == 0 else f"请数一数图中{CN_COLOURS[ask]}圆形的数量。"
            e_text = f"图像中没有{CN_COLOURS[ask]}圆形"
        else:
            text = (f"What is the number of {ask} discs in the image?" if i % 2 == 0
                    else f"How many {ask} discs can be seen in this picture?")
            e_text = f"The image does not feature {ask} discs"
        choices = [f"({chr(65 + k)}) {v}" for k, v in enumerate(numbers)] + [f"(E) {e_text}"]
        gold = "E" if absent else chr(65 + numbers.index(count))
        rec: dict[str, Any] = {
            "Question_id": f"{task.lower()}/{folder}/{category}/{i:04d}",
            "Image": pic["name"],
            "Text": text,
            ("Question Type" if i % 2 else "Question type"): "Multiple Choice",
            "Answer choices": choices,
            "Ground truth": gold,
            "Task": task,
            "Subtask": subtask,
            "Category": category,
        }
        if dataset:
            rec["Dataset"] = dataset
        rec["_draw"] = dict(pic)
        out.append(rec)
    return out


def write_forms(folder: Path, records: list[dict[str, Any]], *, json_name: str = "MME_RealWorld.json",
                tsv_name: str | None = "MME_RealWorld.tsv", size: tuple[int, int] = (640, 480)) -> None:
    """The pictures, the official JSON and (optionally) the VLMEvalKit TSV of the same records."""
    folder.mkdir(parents=True, exist_ok=True)
    clean = []
    for rec in records:
        pic = rec["_draw"]
        target = folder / "images" / pic["name"]
        if not target.exists():
            draw(target, pic["colour"], pic["count"], pic["seed"], size)
        clean.append({k: (f"images/{v}" if k == "Image" else v) for k, v in rec.items() if k != "_draw"})
    (folder / json_name).write_text(json.dumps(clean, ensure_ascii=False, indent=4) + "\n", encoding="utf-8")
    if tsv_name is None:
        return
    first_index: dict[str, int] = {}
    with (folder / tsv_name).open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["index", "image", "question", "multi-choice options", "A", "B", "C", "D", "E", "answer",
                    "category", "l2-category"])
        for k, rec in enumerate(clean):
            image = rec["Image"]
            if image in first_index:
                cell = str(first_index[image])
            else:
                first_index[image] = k
                cell = base64.b64encode((folder / image).read_bytes()).decode("ascii")
            texts = [c.split(") ", 1)[1] for c in rec["Answer choices"]]
            w.writerow([k, cell, rec["Text"], str(rec["Answer choices"]), *texts, rec["Ground truth"],
                        f"{rec['Task']}/{rec['Subtask']}", rec["Category"]])


def main() -> None:
    here = Path(__file__).resolve().parent
    write_forms(here, build_records(33))
    write_forms(here, build_records(6, cn=True), json_name="MME_RealWorld_CN.json", tsv_name=None)


if __name__ == "__main__":
    main()
