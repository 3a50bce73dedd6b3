"""bench/overhead.py's fixtures: a canned OpenAI-compatible server in its own process (the same reply at
once, so what is timed is evalkit, not a model) and an MME-RealWorld-shaped data set of real-size images."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import free_port, stop_process

CANNED = [json.dumps({
    "id": "chatcmpl-canned", "object": "chat.completion", "created": 0, "model": "sim-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": letter}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 300, "completion_tokens": 1, "total_tokens": 301},
}).encode() for letter in "ABCD"]
MODELS = json.dumps({"object": "list", "data": [{"id": "sim-model", "object": "model"}]}).encode()


# ------------------------------------------------------------------ the canned server


def serve(port: int, latency_ms: float) -> None:
    """Read the body, sleep, answer a canned completion; nothing parsed, nothing decoded."""
    from aiohttp import web

    served = [0]

    async def complete(request: web.Request) -> web.Response:
        await request.read()
        if latency_ms > 0:
            await asyncio.sleep(latency_ms / 1000)
        served[0] += 1
        return web.Response(body=CANNED[served[0] % 4], content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        return web.Response(body=MODELS, content_type="application/json")

    async def health(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "served": served[0]})

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


class CannedServer:
    """This module with --serve in a child process; killed on exit, also on error."""

    def __init__(self, latency_ms: float):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.latency_ms = latency_ms
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> CannedServer:
        import urllib.request

        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(self.port), str(self.latency_ms)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"canned server exited: {self.proc.stderr.read().decode(errors='replace')}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).read()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("canned server did not start within 30 s") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)


# ------------------------------------------------------------------ the data set


def build_dataset(folder: Path, n_items: int, n_images: int) -> Path:
    """n_images noise-and-shapes JPEGs of ~30 KB (kept between runs) and an mcq JSONL over them."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter

    (folder / "images").mkdir(parents=True, exist_ok=True)
    quality = None
    for k in range(n_images):
        path = folder / "images" / f"img{k:04d}.jpg"
        if path.exists():
            continue
        rng = np.random.default_rng(k)
        img = Image.fromarray(rng.integers(0, 256, (288, 384, 3), dtype=np.uint8)).filter(ImageFilter.GaussianBlur(1.2))
        draw = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = int(rng.integers(384)), int(rng.integers(288))
            box = (x0, y0, x0 + int(rng.integers(20, 140)), y0 + int(rng.integers(20, 140)))
            draw.rectangle(box, fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        if quality is None:  # searched once on the first picture: the others have the same statistics
            quality = next((q for q in range(95, 4, -5) if _jpeg_size(img, q) <= 32_000), 5)
        img.save(path, "JPEG", quality=quality)
    data = folder / f"data-{n_items}.jsonl"
    if not data.exists():
        rng = random.Random(0)
        with data.open("w", encoding="utf-8") as f:
            for i in range(n_items):
                f.write(json.dumps({
                    "id": f"q{i:05d}", "image": f"images/img{i * n_images // n_items:04d}.jpg",
                    "question": f"Question {i}: what is shown in the picture?",
                    "options": {"A": "a cat", "B": "a dog", "C": "a tree", "D": "a car"},
                    "answer": "ABCD"[rng.randrange(4)], "category": f"cat{i % 5}"}) + "\n")
    return data


def _jpeg_size(img: Any, quality: int) -> int:
    import io

    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality)
    return buf.tell()


if __name__ == "__main__" and len(sys.argv) > 3 and sys.argv[1] == "--serve":
    serve(int(sys.argv[2]), float(sys.argv[3]))
