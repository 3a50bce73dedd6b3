"""Prompt-cache-friendly scheduling: cached-input tokens with image grouping on and off.

An IF-Bench-shaped set — every image asked about 8 times (4 option shifts x 2 languages in
the real benchmark; here 8 differently worded questions) — runs through the full evalkit
path against the simulated server in its own process, once with grouping (the default) and
once with `--no-group-images`, for the OpenAI wire format (automatic prefix caching, prompts
of 1,024+ tokens) and the Anthropic one (explicit cache breakpoint on the image).
Prints, per provider and setting, the share of queries after the first per image that
reported cached-input tokens. Target: >= 70% with grouping; far fewer without.

    .venv/bin/python bench/prompt_cache.py [--images 60] [--per-image 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SimProcess, env_without_keys  # noqa: E402

from evalkit.engine.evaluate import run_async  # noqa: E402

QUESTIONS = ["Which object is largest?", "What colour dominates?", "How many shapes are there?",
             "Where is the brightest spot?", "Is it day or night?", "Which shape is on the left?",
             "What is in the centre?", "Which colour is rarest?"]


def write_set(folder: Path, n_images: int, per_image: int) -> Path:
    """1536x768 images (1,105 OpenAI image tokens: above the 1,024-token caching threshold)."""
    (folder / "images").mkdir(parents=True)
    rng = random.Random(0)
    lines = []
    for i in range(n_images):
        img = Image.new("RGB", (1536, 768), tuple(rng.randrange(256) for _ in range(3)))
        draw = ImageDraw.Draw(img)
        for _ in range(6):
            x, y = rng.randrange(1400), rng.randrange(650)
            draw.ellipse((x, y, x + 120, y + 110), fill=tuple(rng.randrange(256) for _ in range(3)))
        img.save(folder / "images" / f"{i}.jpg", quality=85)
        for j in range(per_image):
            lines.append({"id": f"i{i}-q{j}", "image": f"images/{i}.jpg", "question": QUESTIONS[j % len(QUESTIONS)],
                          "options": {"A": "one", "B": "two", "C": "three", "D": "four"}, "answer": "A"})
    # as in IF-Bench, an item's variants are consecutive: sent together, they all miss the cache
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return data


async def share_cached(provider: str, url: str, data: Path, out: Path, grouped: bool, concurrency: int) -> float:
    env = {**env_without_keys(), "ANTHROPIC_API_KEY": "sk-ant-bench", "OPENAI_API_KEY": "sk-bench"}
    base = url if provider != "openai" else url + "/v1"
    res = await run_async("mcq", f"{provider}/sim-model", data=str(data), base_url=base, env=env, out=str(out),
                          no_cache=True, progress=False, concurrency=concurrency, group_images=grouped)
    per_image: dict[str, list[bool]] = {}
    for rec in res.records:
        per_image.setdefault(rec.item_id.split("-")[0], []).append(rec.usage.get("cached_input_tokens", 0) > 0)
    followers = sum(len(v) - 1 for v in per_image.values())  # every query but the first per image
    hits = sum(min(sum(v), len(v) - 1) for v in per_image.values())
    return hits / max(1, followers)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=60)
    ap.add_argument("--per-image", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    args = ap.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        data = write_set(Path(tmp) / "ds", args.images, args.per_image)
        print(f"{args.images} images x {args.per_image} questions, {args.concurrency} in flight, "
              f"server latency {args.latency_ms:g} ms")
        print(f"{'provider':<10} {'grouping':<9} {'followers with cached input':>28}")
        for provider in ("openai", "anthropic"):
            shares = {}
            for grouped in (True, False):
                with SimProcess("--latency-ms", str(args.latency_ms)) as sim:
                    out = Path(tmp) / f"{provider}-{grouped}"
                    shares[grouped] = asyncio.run(share_cached(provider, sim.url, data, out, grouped,
                                                               args.concurrency))
                print(f"{provider:<10} {'on' if grouped else 'off':<9} {shares[grouped]:>27.1%}")
            verdict = shares[True] >= 0.7 and shares[False] < shares[True]
            ok &= verdict
            print(f"{'':<10} target: >= 70% with grouping, fewer without: {'ok' if verdict else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
