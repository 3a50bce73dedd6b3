"""A provider that answers "A" at once, and queries over five drawn images: for the tests that drive
a Runner without a server (the cache lookups of test_finish.py, test_endpoint_spelling.py and
test_hardening2_surrogates.py)."""

from __future__ import annotations

import io

from synthetic_data import draw_image

from evalkit.core.types import ImagePart, ImageRef, Message, Query, Response, Usage
from evalkit.providers.base import ProviderSpec


class Echo:
    """A provider answering "A" at once, counting what it was sent."""

    def __init__(self) -> None:
        self.spec = ProviderSpec("vllm", "m", ("http://127.0.0.1:9/v1",))
        self.sent = 0

    async def complete(self, messages, params, images):  # noqa: ANN001, ANN201
        self.sent += 1
        return Response(text="A", usage=Usage(10, 1))

    def describe_params(self, params):  # noqa: ANN001, ANN201
        return params.to_dict()

    async def close(self) -> None:
        return None


def echo_queries(n: int) -> list[Query]:
    """n queries, each with one of five drawn images and the gold answer "A"."""
    images = [ImagePart(ImageRef.from_bytes(_png(i))) for i in range(5)]
    return [Query(f"q{i}", f"q{i}", f"q{i}", {}, (Message.user(images[i % 5], f"Question {i}?"),), "A")
            for i in range(n)]


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    draw_image(seed).save(buf, "PNG")
    return buf.getvalue()
