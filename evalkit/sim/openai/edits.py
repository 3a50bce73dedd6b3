"""`POST /v1/images/edits` for the simulated server: OpenAI's image-edit wire format.

The real `openai` SDK sends a multipart form (`image` or `image[]` files, `prompt`, `model`,
...), so tests exercise its real upload path. The "edit" is a pure function of the first
input image (`simulated_edit`, shared with the Gemini dialect), so a test can predict the
output pixel for pixel. Faults, latency, the rps bucket and counters are the server's own
(SimState), as for chat.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import time
from typing import TYPE_CHECKING, Any

from aiohttp import BodyPartReader, web
from PIL import Image

from evalkit.sim.gemini import simulated_edit  # one transform for both edit routes
from evalkit.sim.machinery.faults import retry_headers
from evalkit.sim.machinery.inject import roll_fault
from evalkit.sim.machinery.state import STATE
from evalkit.sim.machinery.wire import error_response
from evalkit.sim.model import server_estimate_tokens, server_image_tokens
from evalkit.sim.openai.dialect import OpenAIDialect

if TYPE_CHECKING:
    from evalkit.sim.machinery.state import SimState


_DIALECT = OpenAIDialect()
_IMAGE_FIELDS = ("image", "image[]")


def server_edit_key(prompt: str, images: list[bytes]) -> str:
    """Counter key of one edit: sha256 of the prompt and the image bytes (per_key counts by it)."""
    h = hashlib.sha256(prompt.encode("utf-8"))
    for data in images:
        h.update(b"\0")
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


async def _read_form(request: web.Request) -> tuple[dict[str, str], list[bytes]]:
    """Text fields and image files of a multipart body, images in the order sent."""
    fields: dict[str, str] = {}
    images: list[bytes] = []
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            continue
        data = await part.read()
        if part.name in _IMAGE_FIELDS:
            images.append(bytes(data))
        elif part.name:
            fields[part.name] = bytes(data).decode("utf-8", "replace")
    return fields, images


def _render(images: list[bytes]) -> tuple[bytes, list[tuple[int, int]], tuple[int, int]]:
    """Thread work: the edited PNG, the input sizes and the output size (ValueError if undecodable)."""
    sizes = []
    for data in images:
        try:
            with Image.open(io.BytesIO(data)) as img:
                sizes.append(img.size)
        except (OSError, Image.DecompressionBombError) as exc:
            raise ValueError(f"could not decode image: {exc}") from exc
    out = simulated_edit(images[0])
    with Image.open(io.BytesIO(out)) as img:
        out_size = img.size
    return out, sizes, out_size


def _edit_body(png: bytes, n: int, prompt: str, sizes: list[tuple[int, int]],
               out_size: tuple[int, int]) -> dict[str, Any]:
    text_tokens = server_estimate_tokens(prompt)
    img_in = sum(server_image_tokens(w, h) for w, h in sizes)
    out_tokens = server_image_tokens(*out_size) * n
    b64 = base64.b64encode(png).decode("ascii")
    return {
        "created": int(time.time()),
        "data": [{"b64_json": b64} for _ in range(n)],
        "output_format": "png",
        "size": f"{out_size[0]}x{out_size[1]}",
        "usage": {"input_tokens": text_tokens + img_in,
                  "input_tokens_details": {"image_tokens": img_in, "text_tokens": text_tokens},
                  "output_tokens": out_tokens, "total_tokens": text_tokens + img_in + out_tokens},
    }


async def handle_image_edit(request: web.Request) -> web.StreamResponse:
    """aiohttp handler for POST /v1/images/edits (registered in server.build_app)."""
    state = request.app[STATE]
    state.counters.start()
    try:
        return await _serve_edit(request, state)
    finally:
        state.counters.finish()


async def _serve_edit(request: web.Request, state: SimState) -> web.StreamResponse:
    counters = state.counters
    try:
        fields, images = await _read_form(request)
    except (ValueError, AssertionError) as exc:  # not multipart, or a broken body
        counters.status(400)
        return _DIALECT.error(400, "bad_request", f"expected a multipart/form-data body: {exc}")
    prompt, model = fields.get("prompt", ""), fields.get("model", "")
    problem = ("missing 'image'" if not images else "missing 'prompt'" if not prompt else None)
    try:
        n = int(fields.get("n") or 1)
    except ValueError:
        n = 0
    problem = problem or (None if 1 <= n <= 10 else "'n' must be an integer from 1 to 10")
    if problem:
        counters.status(400)
        return _DIALECT.error(400, "bad_request", problem)
    if (wait := state.limits.admit_request()) > 0:
        counters.status(429)
        return _DIALECT.error(429, "rate_limit", "rate limit exceeded (rps)", retry_headers(wait))
    if state.config.strict_model and model != state.config.served_model_name:
        counters.status(404)
        return _DIALECT.error(404, "not_found", f"The model `{model}` does not exist.")

    fault, served = await roll_fault(request, state, _DIALECT)
    if served is not None:
        return served
    if fault == "refusal":  # how the Images API declines: a 400 with a moderation code
        counters.status(400)
        return error_response(400, "Your request was rejected by the safety system (injected).",
                              "image_generation_user_error", "moderation_blocked")
    if fault == "empty":
        return web.json_response({"created": int(time.time()), "data": []})

    try:
        png, sizes, out_size = await asyncio.to_thread(_render, images)
    except ValueError as exc:
        counters.status(400)
        return _DIALECT.error(400, "bad_request", str(exc))
    counters.completed(server_edit_key(prompt, images))
    return web.json_response(_edit_body(png, n, prompt, sizes, out_size))

