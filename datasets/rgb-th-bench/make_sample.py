"""Write the bundled RGB-Th-Bench sample: three drawn scenes in the public release's tree form.

Run from anywhere: `python datasets/rgb-th-bench/make_sample.py`. Deterministic (no randomness,
no timestamps), so re-running leaves the files unchanged.

    Source 1/Hot Water Pipe/   questions.json, rgb.jpg, thermal.jpg   (scene name with spaces)
    Source 1/Fuse Box Door/    questions.json, rgb.jpg, thermal.jpg
    Source 2/1/                questions.json, rgb.png, thermal.png   (PNG; data_id relative to the source)

Each scene has the 16 skills of the release (14 of the paper + 2 text-reference skills),
four questions each: 192 questions, 48 blocks. "Is there any visible number on the image?"
is asked of every scene with different answers (only the images tell them apart).
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
W, H = 320, 240
IRON = [(20, 0, 60), (90, 0, 140), (200, 30, 60), (240, 120, 0), (255, 220, 40), (255, 255, 220)]


def heat(t: float) -> tuple[int, int, int]:
    """An "iron" palette colour for t in [0, 1] (cold purple to hot white)."""
    t = min(1.0, max(0.0, t)) * (len(IRON) - 1)
    i = min(int(t), len(IRON) - 2)
    f = t - i
    return tuple(round(a + (b - a) * f) for a, b in zip(IRON[i], IRON[i + 1], strict=True))  # type: ignore[return-value]


def draw_scene(kind: str) -> tuple[Image.Image, Image.Image]:
    """An RGB picture and its thermal counterpart (with a colour bar on the right)."""
    rgb = Image.new("RGB", (W, H), (200, 200, 190))
    th = Image.new("RGB", (W, H), heat(0.25))
    r, t = ImageDraw.Draw(rgb), ImageDraw.Draw(th)
    if kind == "pipe":
        r.rectangle((0, 0, W, 60), fill=(235, 235, 240))  # wall
        r.rectangle((20, 120, 300, 150), fill=(180, 90, 40))  # copper pipe
        r.rectangle((140, 90, 180, 180), fill=(60, 60, 200))  # blue valve
        r.text((10, 200), "42", fill=(0, 0, 0))
        t.rectangle((20, 120, 300, 150), fill=heat(0.9))
        t.rectangle((140, 90, 180, 180), fill=heat(0.6))
    elif kind == "fuse":
        r.rectangle((80, 30, 240, 210), fill=(120, 120, 125))  # grey panel
        for k in range(4):
            r.rectangle((100 + 35 * k, 60, 125 + 35 * k, 110), fill=(20, 20, 20))  # black breakers
        r.text((100, 180), "MAIN 100A", fill=(255, 255, 255))
        t.rectangle((80, 30, 240, 210), fill=heat(0.35))
        t.rectangle((205, 60, 230, 110), fill=heat(0.95))  # one hot breaker
    else:
        r.rectangle((0, 0, W, 100), fill=(120, 170, 230))  # sky
        r.rectangle((60, 110, 260, 220), fill=(150, 40, 40))  # red brick house
        r.rectangle((140, 150, 180, 200), fill=(240, 240, 250))  # window
        t.rectangle((0, 0, W, 100), fill=heat(0.0))
        t.rectangle((60, 110, 260, 220), fill=heat(0.45))
        t.rectangle((140, 150, 180, 200), fill=heat(0.8))  # heat loss at the window
    for y in range(H):  # colour bar, cold at the bottom
        t.line((W - 14, y, W - 4, y), fill=heat(1 - y / (H - 1)))
    return rgb, th


QUESTIONS: dict[str, list[tuple[str, str]]] = {
    "Scene Understanding": [("Is this an indoor scene?", "Y"), ("Is this a beach?", "N"),
                            ("Is the scene related to building maintenance?", "Y"), ("Is this a sports field?", "N")],
    "Detailed Object Presence": [("Is there a cat in the image?", "N"), ("Is there a wall in the image?", "Y"),
                                 ("Is there a car in the image?", "N"), ("Is there a tree in the image?", "N")],
    "Instance Attributes": [("Is the largest object mostly blue?", "N"), ("Is the background light in colour?", "Y"),
                            ("Is the main object round?", "N"), ("Is the main object made of glass?", "N")],
    "Instance Location w.r.t. Image": [("Is the main object in the centre of the image?", "Y"),
                                       ("Is the main object in the top-left corner?", "N"),
                                       ("Is the main object at the very bottom edge?", "N"),
                                       ("Does the main object span most of the image width?", "Y")],
    "Instance Spatial Relation": [("Is the main object below the top edge of the image?", "Y"),
                                  ("Is anything floating above the roof?", "N"),
                                  ("Is the main object behind a fence?", "N"),
                                  ("Is the main object in front of the background?", "Y")],
    "Instance Counting": [("Are there exactly two main objects?", "N"), ("Are there more than ten objects?", "N"),
                          ("Is there at least one object?", "Y"), ("Are there exactly seven objects?", "N")],
    "Instance Interaction": [("Is a person holding the main object?", "N"), ("Is the main object attached to a surface?", "Y"),
                             ("Is an animal touching the main object?", "N"), ("Is the main object connected to a structure?", "Y")],
    "Temperature to Color Mapping Understanding": [
        ("Is there a colour bar in the thermal image?", "Y"),
        ("Is the following sequence of colors correctly representing temperature distribution from low to high: purple, orange, yellow?", "Y"),
        ("Is the following sequence of colors correctly representing temperature distribution from low to high: yellow, orange, purple?", "N"),
        ("Does white represent the coldest temperature?", "N")],
    "RGB-Thermal-Heatmap Alignment": [("Is the thermal image viewpoint exactly matching the RGB image viewpoint without any shift or zoom?", "Y"),
                                      ("Is the thermal image a zoomed-in crop of the RGB image?", "N"),
                                      ("Is the thermal image shifted to the left compared to the RGB image?", "N"),
                                      ("Should the heatmap be shifted down to match the objects?", "N")],
    "Instance Thermal Attribute": [("Is the main object warmer than the background?", "Y"), ("Is the main object the same temperature everywhere?", "N"),
                                   ("Is the background very hot?", "N"), ("Does the main object show a warm region?", "Y")],
    "Relative Thermal Attribute": [("Is the background colder than the main object?", "Y"), ("Is the colour bar's top colder than its bottom?", "N"),
                                   ("Is the hottest object warmer than the background?", "Y"), ("Is the background warmer than every object?", "N")],
    "Warmest Areas Detection": [("Is the background the warmest area?", "N"), ("Is the colour bar's top the warmest colour?", "Y"),
                                ("Is the left edge the warmest area?", "N"), ("Is the warmest area inside the main object?", "Y")],
    "Coldest Areas Detection": [("Is the main object the coldest area?", "N"), ("Is the hottest spot the coldest area?", "N"),
                                ("Is the colour bar's bottom the coldest colour?", "Y"), ("Is the warm region the coldest area?", "N")],
    "Risk and Anomaly Detection": [("Does the thermal image suggest a fire?", "N"), ("Is there a localized hot spot that may need inspection?", "Y"),
                                   ("Is the whole scene frozen?", "N"), ("Is there an unexpected cold leak at the bottom edge?", "N")],
    "Numerical Text Reference Understanding": [("Is there any visible number on the image?", "?"), ("Is the number 999 written in the image?", "N"),
                                               ("Is there a clock showing the time?", "N"), ("Is there a price tag?", "N")],
    "Non-Numerical Text Reference Understanding": [("Is there any visible non-numerical text on the image?", "?"), ("Is the word EXIT written in the image?", "N"),
                                                   ("Is there a street sign?", "N"), ("Is there a book title?", "N")],
}
PAIR_SKILLS = set(list(QUESTIONS)[7:14])
SCENES = [("Source 1", "Hot Water Pipe", "pipe", "jpg", True, False),
          ("Source 1", "Fuse Box Door", "fuse", "jpg", True, True),
          ("Source 2", "1", "house", "png", False, False)]


def main() -> None:
    for source, scene, kind, ext, number, text in SCENES:
        folder = HERE / source / scene
        folder.mkdir(parents=True, exist_ok=True)
        rgb, th = draw_scene(kind)
        save = {"quality": 92} if ext == "jpg" else {}
        rgb.save(folder / f"rgb.{ext}", **save)
        th.save(folder / f"thermal.{ext}", **save)
        rgb_id, th_id = f"{scene}/rgb.{ext}", f"{scene}/thermal.{ext}"
        blocks = []
        for skill, qas in QUESTIONS.items():
            pair = skill in PAIR_SKILLS
            out = []
            for question, a in qas:
                if a == "?":
                    a = "Y" if (number if "number" in question else text) else "N"
                out.append({"question": question, "answer": "Yes" if a == "Y" else "No"})
            blocks.append({"version": "v1", "data_source": source, "data_id": [rgb_id, th_id] if pair else rgb_id,
                           "data_type": "RGB-Thermal Pair" if pair else "Single RGB Image",
                           "skill_type": skill, "QAs": out})
        (folder / "questions.json").write_text(json.dumps({"data": blocks}, indent=4) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
