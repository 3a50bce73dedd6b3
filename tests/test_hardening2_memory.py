"""Memory bounded by the concurrency and by caps, not by the data (issue 31 item 11).

A run has twice as many workers as request slots, and each worker prepared its query's images before
waiting for a slot: 64 prepared 12 Mpx photos (their bytes and their base64 text, 7.7 MB each) for 32
requests, 1.1 GB at its peak. Now at most the concurrency plus a few queries hold prepared images, and a
big image's base64 text is made for its request instead of kept with it. These tests count objects and
calls; they do not measure memory (bench/image_memory.py does).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import weakref

from PIL import Image

from evalkit.ask.cache import NullCache
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.core.types import ImagePart, ImageRef, Message, Query, Response, Usage
from evalkit.images.pipeline import TEXT_KEPT_UP_TO, ImagePipeline, PreparedImage
from evalkit.providers.base import ProviderSpec

SLOTS, AHEAD, WORKERS = 6, 3, 16


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (seed * 7 % 256, seed * 13 % 256, 90)).save(buf, "PNG")
    return buf.getvalue()


class _Held:
    """A provider that holds every request until released, counting those it holds."""

    def __init__(self) -> None:
        self.spec = ProviderSpec("vllm", "m", ("http://127.0.0.1:9/v1",))
        self.inside = 0
        self.release = asyncio.Event()

    async def complete(self, messages, params, images):  # noqa: ANN001, ANN201
        self.inside += 1
        await self.release.wait()
        return Response(text="A", usage=Usage(10, 1))

    def describe_params(self, params):  # noqa: ANN001, ANN201
        return params.to_dict()

    async def close(self) -> None:
        return None


class _CountingSemaphore(asyncio.Semaphore):
    waiting = 0

    async def acquire(self) -> bool:
        if self.locked():
            _CountingSemaphore.waiting += 1
            try:
                return await super().acquire()
            finally:
                _CountingSemaphore.waiting -= 1
        return await super().acquire()


def test_prepared_images_are_held_by_the_requests_in_flight_and_a_few_more():
    provider, pipeline = _Held(), ImagePipeline(max_bytes=1)  # the memo keeps nothing: every image is a query's
    limiter = Limiter(concurrency=SLOTS)
    runner = Runner(provider, limiter=limiter, cache=NullCache(), pipeline=pipeline, policy=RetryPolicy(max_attempts=1))
    runner.hold_images(SLOTS + AHEAD)
    runner.in_hand = _CountingSemaphore(SLOTS + AHEAD)
    alive: weakref.WeakSet[PreparedImage] = weakref.WeakSet()
    prepared = [0]
    real_prepare, real_slot = pipeline.prepare, limiter.slot
    at_slot = [0]

    def prepare(part: ImagePart) -> PreparedImage:
        out = real_prepare(part)
        prepared[0] += 1
        alive.add(out)
        return out

    @contextlib.asynccontextmanager
    async def slot(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a query that has its images
        at_slot[0] += 1
        async with real_slot(*args, **kwargs) as s:
            yield s

    pipeline.prepare = prepare  # type: ignore[method-assign]
    limiter.slot = slot  # type: ignore[method-assign]
    queries = [Query(f"q{i}", f"q{i}", f"q{i}", {}, (Message.user(ImagePart(ImageRef.from_bytes(_png(i))),
                                                                   f"Question {i}?"),), "A") for i in range(40)]
    seen: dict[str, int] = {}

    async def main() -> list:
        outcomes: list = []
        run = asyncio.ensure_future(runner.run(queries, outcomes.append, workers=WORKERS))
        # every worker parked: SLOTS requests held by the server, the rest waiting for a slot (images in
        # hand) or for their turn to prepare (none)
        while not (provider.inside == SLOTS and (at_slot[0] - SLOTS) + _CountingSemaphore.waiting == WORKERS - SLOTS):
            assert not run.done(), run
            await asyncio.sleep(0.001)
        seen.update(prepared=prepared[0], alive=len(alive), waiting_to_prepare=_CountingSemaphore.waiting)
        provider.release.set()
        await run
        return outcomes

    try:
        outcomes = asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        pipeline.close()
    assert seen == {"prepared": SLOTS + AHEAD, "alive": SLOTS + AHEAD, "waiting_to_prepare": WORKERS - SLOTS - AHEAD}
    assert len(outcomes) == 40 and all(o.response.text == "A" for o in outcomes)


def test_a_big_images_base64_text_is_made_per_request_not_kept():
    small = PreparedImage(b"\x01" * 1000, "image/jpeg", 10, 10)
    big = PreparedImage(b"\x02" * (TEXT_KEPT_UP_TO + 3), "image/jpeg", 4000, 3000)
    assert small.data_uri() is small.data_uri() and small.b64() is small.b64()  # kept: computed once
    assert big.data_uri() == big.data_uri() and big.data_uri() is not big.data_uri()  # made each time
    assert big.b64() is not big.b64()
    assert big.data_uri_bytes() == big.data_uri().encode("ascii")
    assert small.data_uri_bytes() == small.data_uri().encode("ascii")
    assert big.nbytes == len(big.data) + 64  # the memo weighs what it keeps
    assert small.nbytes == 1000 + 4 * 334 + 64
