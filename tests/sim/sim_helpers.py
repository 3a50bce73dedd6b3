"""Helpers shared by the simulator tests: images, request bodies, answer-key queries."""

from __future__ import annotations

import base64
import io
import json

import aiohttp
from PIL import Image, ImageDraw
from synthetic_data import REPO

from evalkit.core.fingerprint import fingerprint_bytes
from evalkit.core.types import ImagePart, ImageRef, Message, Query

PROMPTS = REPO / "prompts" / "extract"
MCQ_TEXT = "What shape is shown?\nA. circle\nB. square\nC. triangle\nD. star\nAnswer with the option's letter."


def make_png(shape: str, size: int = 256) -> bytes:
    """A synthetic picture: one dark shape on a light background."""
    img = Image.new("RGB", (size, size), (235, 235, 235))
    draw = ImageDraw.Draw(img)
    s = size
    if shape == "circle":
        draw.ellipse((s * 0.1, s * 0.1, s * 0.6, s * 0.6), fill=(20, 20, 120))
    elif shape == "square":
        draw.rectangle((s * 0.45, s * 0.4, s * 0.95, s * 0.9), fill=(120, 20, 20))
    else:
        draw.polygon([(s * 0.5, s * 0.05), (s * 0.05, s * 0.95), (s * 0.95, s * 0.95)], fill=(20, 120, 20))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def shrink_to_jpeg(png: bytes, factor: float = 0.5) -> bytes:
    """What a client pipeline does before sending: downscale and re-encode."""
    with Image.open(io.BytesIO(png)) as img:
        small = img.convert("RGB").resize((int(img.width * factor), int(img.height * factor)))
    buf = io.BytesIO()
    small.save(buf, "JPEG", quality=70)
    return buf.getvalue()


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def user_message(text: str, *images: bytes, mime: str = "image/png") -> dict:
    parts = [{"type": "image_url", "image_url": {"url": data_uri(b, mime)}} for b in images]
    return {"role": "user", "content": [*parts, {"type": "text", "text": text}]}


def body(text: str, *images: bytes, model: str = "sim-model", **extra) -> dict:
    return {"model": model, "messages": [user_message(text, *images)], "temperature": 0, **extra}


def fp_of(part: ImagePart) -> str:
    assert isinstance(part.ref.value, bytes)
    return fingerprint_bytes(part.ref.value)


def query(qid: str, base_id: str, text: str, gold: str, options: dict[str, str], *images: bytes) -> Query:
    parts = [ImagePart(ImageRef.from_bytes(b)) for b in images]
    return Query(qid, qid, base_id, {}, (Message.user(*parts, text),), gold, options)


OPTIONS = {"A": "circle", "B": "square", "C": "triangle", "D": "star"}


async def post(session: aiohttp.ClientSession, url: str, payload: dict) -> tuple[int, dict, dict]:
    async with session.post(url + "/v1/chat/completions", json=payload) as resp:
        text = await resp.text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = {"_raw": text}
        return resp.status, dict(resp.headers), data
