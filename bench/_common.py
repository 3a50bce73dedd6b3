"""Shared helpers of the bench scripts: the simulated server in its own process, a test image,
a JSONL dataset, and the bare aiohttp baseline loop.

Everything here is bounded: the server is started with a deadline and always killed, and the
bare loop gives every request a timeout.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
from PIL import Image, ImageDraw, ImageFilter

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "What is shown in the picture?\nA. a cat\nB. a dog\nC. a tree\nD. a car\nAnswer with the option's letter."


# ------------------------------------------------------------------ the image


def make_jpeg(path: Path, target_kb: tuple[int, int] = (28, 32), seed: int = 1) -> int:
    """Write a JPEG of target_kb KB (noise + shapes), searching the quality; returns its size."""
    rng = random.Random(seed)
    w, h = 384, 288
    noise = Image.frombytes("RGB", (w, h), bytes(rng.getrandbits(8) for _ in range(w * h * 3)))
    img = noise.filter(ImageFilter.GaussianBlur(1.2))
    draw = ImageDraw.Draw(img)
    for _ in range(12):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        x1, y1 = x0 + rng.randrange(20, 140), y0 + rng.randrange(20, 140)
        colour = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=colour)
    lo_b, hi_b = target_kb[0] * 1000, target_kb[1] * 1000
    best: bytes = b""
    lo, hi = 5, 95
    while lo <= hi:  # bounded binary search over the quality
        q = (lo + hi) // 2
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=q)
        data = buf.getvalue()
        best = data
        if len(data) < lo_b:
            lo = q + 1
        elif len(data) > hi_b:
            hi = q - 1
        else:
            break
    path.write_bytes(best)
    return len(best)


def chat_body(image: bytes, question: str, model: str = "sim-model") -> bytes:
    """The OpenAI chat-completions body evalkit's vllm provider sends, pre-encoded."""
    uri = "data:image/jpeg;base64," + base64.b64encode(image).decode("ascii")
    body = {
        "model": model,
        "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": uri}},
            {"type": "text", "text": question},
        ]}],
        "max_tokens": 1024,
        "temperature": 0.0,
    }
    return json.dumps(body).encode()


def write_dataset(path: Path, image: Path, n: int) -> None:
    """An `mcq` JSONL of n items on one image, each with a distinct question (nothing deduplicates)."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({
                "id": f"q{i}", "image": str(image), "question": f"Question {i}: what is shown in the picture?",
                "options": {"A": "a cat", "B": "a dog", "C": "a tree", "D": "a car"}, "answer": "A",
            }) + "\n")


# ------------------------------------------------------------------ the server process


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen | None) -> None:
    """Terminate a child still running (kill it if it does not go within 5 s)."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def http_json(url: str, method: str = "GET", timeout: float = 10.0) -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read()
    return json.loads(body) if body else None


class SimProcess:
    """`python -m evalkit.cli sim ...` in a child process; a context manager that always kills it."""

    def __init__(self, *args: str, startup_s: float = 30.0):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self.startup_s = startup_s
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SimProcess:
        cmd = [sys.executable, "-m", "evalkit.cli", "sim", "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + self.startup_s
        try:
            while True:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                    raise RuntimeError(f"simulated server exited with {self.proc.returncode}: {err.strip()}")
                try:
                    urllib.request.urlopen(self.url + "/health", timeout=1.0).read()
                    return self
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"simulated server did not answer /health within {self.startup_s:g}s")
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def counters(self) -> dict[str, Any]:
        snap = http_json(self.url + "/sim/counters")
        snap.pop("per_key", None)
        return snap

    def reset(self) -> None:
        http_json(self.url + "/sim/reset", method="POST")

    def close(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ the bare baseline


async def bare_loop(url: str, bodies: list[bytes], concurrency: int, timeout_s: float = 60.0) -> dict[str, int]:
    """POST each body once, `concurrency` in flight on one ClientSession; counts by status (no retries)."""
    sem = asyncio.Semaphore(concurrency)
    statuses: dict[str, int] = {}
    target = url + "/v1/chat/completions"
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=max(100, concurrency))
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:

        async def one(body: bytes) -> None:
            async with sem:
                try:
                    async with session.post(target, data=body, headers=headers) as resp:
                        await resp.read()
                        key = str(resp.status)
                except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                    key = type(e).__name__
                statuses[key] = statuses.get(key, 0) + 1

        await asyncio.gather(*(one(b) for b in bodies))
    return statuses


def env_without_keys() -> dict[str, str]:
    """The environment evalkit sees: no real provider URLs or keys can leak into a bench run."""
    drop = ("OPENAI_BASE_URL", "VLLM_BASE_URL", "OPENAI_API_KEY", "VLLM_API_KEY")
    return {k: v for k, v in os.environ.items() if k not in drop}
