"""Write the bundled IF-Bench sample: 20 questions in the official dict-by-dimension form.

Run from anywhere: `python datasets/if-bench/make_sample.py`. Deterministic (fixed seed),
so re-running leaves the files unchanged. The questions are written here (not taken from
IF-Bench); the pictures are drawn: a grey "thermal" scene with warm (bright) blobs in
infrared_imgs/, and a colourised copy standing in for GenViP's RGB translation in
translated_rgb_imgs/ (same file names). Two questions per dimension, 14 images; like the
real set, one question repeats with the same options on two images (different answers),
one option holds an apostrophe, and some items carry `pos_info` / `original_answer`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

HERE = Path(__file__).resolve().parent
SIDE = 64
SEED = 20251210

# (dimension, image index, en question, en options, cn question, cn options, answer, extra keys)
Q = [
    ("Scene Understanding", 0, "What type of scene is shown in this infrared image?",
     ["An urban street", "A forest trail", "A beach", "An indoor office"],
     "这张红外图像展示的是什么类型的场景？", ["城市街道", "森林小径", "海滩", "室内办公室"], "A", {}),
    ("Scene Understanding", 1, "What type of scene is shown in this infrared image?",
     ["An urban street", "A forest trail", "A beach", "An indoor office"],
     "这张红外图像展示的是什么类型的场景？", ["城市街道", "森林小径", "海滩", "室内办公室"], "B", {}),
    ("Image Theme", 2, "What is the most likely theme of this infrared image?",
     ["Security surveillance", "Wildlife monitoring", "Traffic surveillance", "Industrial inspection"],
     "这张红外图像最可能的主题是什么？", ["安防监控", "野生动物监测", "交通监控", "工业检测"], "C", {}),
    ("Image Theme", 3, "What is the most likely theme of this infrared image?",
     ["Traffic surveillance", "Security surveillance", "Wildlife monitoring", "Medical imaging"],
     "这张红外图像最可能的主题是什么？", ["交通监控", "安防监控", "野生动物监测", "医学成像"], "D", {}),
    ("Viewpoint of Capture", 4, "From which viewpoint was this image captured?",
     ["Aerial view", "Eye level", "Low angle", "Close-up"],
     "这张图像是从哪个视角拍摄的？", ["航拍视角", "平视", "仰视", "特写"], "A", {}),
    ("Viewpoint of Capture", 5, "From which viewpoint was this image captured?",
     ["Eye level", "Aerial view", "Close-up", "Low angle"],
     "这张图像是从哪个视角拍摄的？", ["平视", "航拍视角", "特写", "仰视"], "B", {}),
    ("Target Localization", 6, "Where is the warmest object located in the image?",
     ["Top left", "Top right", "Bottom left", "Bottom right"],
     "图像中温度最高的物体位于哪里？", ["左上方", "右上方", "左下方", "右下方"], "C",
     {"pos_info": [[8, 40, 24, 56]]}),
    ("Target Localization", 7, "Where is the warmest object located in the image?",
     ["Top left", "Top right", "Bottom left", "Bottom right"],
     "图像中温度最高的物体位于哪里？", ["左上方", "右上方", "左下方", "右下方"], "D",
     {"pos_info": [[40, 40, 56, 56]]}),
    ("Spatial Relationship Understanding", 8, "What is to the left of the person?",
     ["A car", "A tree", "A bicycle", "Nothing"],
     "人的左边是什么？", ["一辆汽车", "一棵树", "一辆自行车", "什么都没有"], "A", {}),
    ("Spatial Relationship Understanding", 9, "What is closest to the camera?",
     ["The pole", "The ground", "The rider's body", "The surrounding plants"],
     "什么离相机最近？", ["杆子", "地面", "骑手的身体", "周围的植物"], "C", {}),
    ("Object Counting", 10, "How many people are visible in the image?", ["1", "2", "3", "4"],
     "图像中可以看到多少人？", ["1", "2", "3", "4"], "B", {"original_answer": "2"}),
    ("Object Counting", 11, "How many vehicles are visible in the image?", ["0", "1", "2", "3"],
     "图像中可以看到多少辆车？", ["0", "1", "2", "3"], "D", {}),
    ("Thermal Feature Understanding", 12, "Which area in the image appears to have the highest thermal activity?",
     ["The crowd of people", "The trees on the right", "The ground in the foreground", "The sky above"],
     "图像中哪个区域显示出最高的热活动？", ["人群", "右边的树木", "前景中的地面", "上方的天空"], "A", {}),
    ("Thermal Feature Understanding", 13, "Which object appears coldest?",
     ["The engine", "The window glass", "The person", "The exhaust pipe"],
     "哪个物体看起来温度最低？", ["发动机", "车窗玻璃", "人", "排气管"], "B", {}),
    ("Action Recognition", 0, "What action is the person in the image performing?",
     ["Running", "Standing still", "Walking", "Cycling"],
     "图像中的人正在做什么动作？", ["跑步", "静止站立", "行走", "骑自行车"], "C", {}),
    ("Action Recognition", 1, "What action is the person in the image performing?",
     ["Running", "Standing still", "Walking", "Cycling"],
     "图像中的人正在做什么动作？", ["跑步", "静止站立", "行走", "骑自行车"], "D", {}),
    ("Thermal Feature Reasoning", 2, "Why does the car's hood appear brighter than its roof?",
     ["The engine heats it", "It is painted white", "It reflects sunlight", "It is made of glass"],
     "为什么汽车引擎盖比车顶更亮？", ["发动机使其发热", "它被漆成白色", "它反射阳光", "它由玻璃制成"], "A",
     {"original_answer": "A"}),
    ("Thermal Feature Reasoning", 3, "What most likely explains the bright spot on the wall?",
     ["A heat leak", "A painted mark", "A shadow", "A window"],
     "墙上的亮斑最可能的原因是什么？", ["热量泄漏", "涂漆标记", "阴影", "窗户"], "A", {}),
    ("Commonsense Reasoning", 4, "What should the driver most likely do next?",
     ["Speed up", "Slow down for the pedestrian", "Turn on the radio", "Park on the sidewalk"],
     "驾驶员接下来最应该做什么？", ["加速", "为行人减速", "打开收音机", "停在人行道上"], "B", {}),
    ("Commonsense Reasoning", 5, "What time of day was this image most likely taken?",
     ["Noon", "Night", "Morning rush hour", "It's impossible to tell"],
     "这张图像最可能是在一天中的什么时间拍摄的？", ["中午", "夜晚", "早高峰", "无法判断"], "B", {}),
]


def draw_ir(index: int) -> Image.Image:
    """A blurred grey scene with a few bright (warm) blobs: distinct per index."""
    rng = random.Random(SEED + index)
    img = Image.new("L", (SIDE, SIDE), rng.randrange(30, 90))
    d = ImageDraw.Draw(img)
    for _ in range(rng.randrange(3, 7)):
        x, y, r = rng.randrange(SIDE), rng.randrange(SIDE), rng.randrange(4, 14)
        d.ellipse((x - r, y - r, x + r, y + r), fill=rng.randrange(120, 256))
    d.rectangle((0, SIDE - 10 - index % 5, SIDE, SIDE), fill=rng.randrange(40, 110))
    return img.filter(ImageFilter.GaussianBlur(1.2)).convert("RGB")


def colourise(ir: Image.Image) -> Image.Image:
    """Stand-in for an RGB translation: grey levels mapped to sky / foliage / skin tones."""
    grey = ir.convert("L")
    lut = [(int(90 + v * 0.5), int(120 + v * 0.3), int(200 - v * 0.4)) for v in range(256)]
    return Image.merge("RGB", [grey.point([c[i] for c in lut]) for i in range(3)])


def main() -> None:
    ir_dir, rgb_dir = HERE / "infrared_imgs", HERE / "translated_rgb_imgs"
    ir_dir.mkdir(exist_ok=True)
    rgb_dir.mkdir(exist_ok=True)
    used = sorted({q[1] for q in Q})
    for i in used:
        ir = draw_ir(i)
        ir.save(ir_dir / f"ir_{i:03d}.png", optimize=True)
        colourise(ir).save(rgb_dir / f"ir_{i:03d}.png", optimize=True)
    data: dict[str, list[dict]] = {}
    for dim, img, en_q, en_o, cn_q, cn_o, answer, extra in Q:
        item = {"dataset": "evalkit-sample", "dst_thermal_path": f"ir_{img:03d}.png"}
        if "pos_info" in extra:
            item["pos_info"] = extra["pos_info"]
        question = {"dimension": dim, "en_question": en_q, "en_options": dict(zip("ABCD", en_o, strict=True)),
                    "answer": answer, "cn_question": cn_q, "cn_options": dict(zip("ABCD", cn_o, strict=True))}
        if "original_answer" in extra:
            question["original_answer"] = extra["original_answer"]
        item["question"] = question
        data.setdefault(dim, []).append(item)
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    (HERE / "if_bench_sample.json").write_text(text, encoding="utf-8")
    print(f"wrote {sum(len(v) for v in data.values())} questions, {len(used)} images to {HERE}")


if __name__ == "__main__":
    main()
