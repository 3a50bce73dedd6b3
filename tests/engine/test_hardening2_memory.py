"""Memory bounded by the concurrency and by caps, not by the data (issue 31 item 11).

A 1 GB data file took 2 GB before "invalid JSON (line 1)", a 1 GB image 1 GB in lint, a 300 MB JSONL
line 1.6 GB in a run. A data line (a JSONL line, a TSV row, a JSON file read whole) and an image are
now capped by bytes before they are read, in one line naming the cap and the flag (--max-line-mb,
--max-image-mb); JSON Lines are read line by line; an image over its cap is that item's data error.

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
import json
import random
import tracemalloc
import weakref
from pathlib import Path

import pytest
from cli_under_test import run_main
from PIL import Image

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.store.cache import NullCache
from evalkit.core import read_caps
from evalkit.core.errors import DataError, EvalkitError
from evalkit.core.types import ImagePart, ImageRef, Message, Query, Response, Usage
from evalkit.images.pipeline import ImagePipeline, PreparedImage
from evalkit.images.prepared import TEXT_KEPT_UP_TO
from evalkit.providers.base import ProviderSpec
from evalkit.sim.server import SimConfig, SimThread

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


# ---------------------------------------------------------------- caps on what one read may hold

def _mcq_line(item_id: str, image: str, question: str) -> str:
    import json

    return json.dumps({"id": item_id, "image": image, "question": question, "options": {"A": "x", "B": "y"},
                       "answer": "A"})


@pytest.fixture
def small_set(tmp_path: Path) -> Path:
    """Four questions on small pictures, one (q2) on a 120 KB one."""
    (tmp_path / "images").mkdir()
    for i in range(4):
        size = 200 if i == 2 else 24
        noise = Image.frombytes("RGB", (size, size), random.Random(i).randbytes(size * size * 3))
        noise.save(tmp_path / "images" / f"i{i}.png")
    (tmp_path / "data.jsonl").write_text("".join(_mcq_line(f"q{i}", f"images/i{i}.png", f"Which {i}?") + "\n"
                                                 for i in range(4)), encoding="utf-8")
    return tmp_path / "data.jsonl"


def test_a_line_over_the_cap_is_read_past_without_being_held(tmp_path, monkeypatch):
    path = tmp_path / "big.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"a": 1}\n"' + b"x" * (24 << 20) + b'"\n{"b": 2}')
    monkeypatch.setattr(read_caps, "CHUNK", 64 << 10)
    tracemalloc.start()
    try:
        with read_caps.using(line_mb=1):
            lines = list(read_caps.text_lines(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == [(1, '{"a": 1}'), (2, None), (3, '{"b": 2}')]
    assert peak < 3 << 20  # the cap and a chunk, not the 24 MB line


def test_run_and_lint_name_a_jsonl_line_over_the_cap(small_set, tmp_path):
    lines = small_set.read_text(encoding="utf-8").splitlines()
    lines.insert(1, _mcq_line("long", "images/i0.png", "x" * 20_000))
    data = tmp_path / "long.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    said = f"{data}: line 2: the line is over the 10 KB cap on one data line (--max-line-mb raises it)"
    proc = run_main(["run", "mcq", "--data", str(data), "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1",
                    "--max-line-mb", "0.01", "--no-cache", "--out", str(tmp_path / "run")], env={"VLLM_API_KEY": "k"})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"evalkit: error: {said}"]
    lint = run_main(["lint", "mcq", "--data", str(data), "--max-line-mb", "0.01", "--no-cache", "--json"])
    found = json.loads(lint.stdout)["findings"]
    assert lint.returncode == 1
    assert [(f["kind"], f["where"], f["message"]) for f in found if f["severity"] == "error"] == [
        ("unreadable-row", "line 2", "line 2: the line is over the 10 KB cap on one data line (--max-line-mb raises it)")]


def test_a_json_file_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from evalkit.benchmarks.readers.mcq import load_jsonl

    data = tmp_path / "set.json"
    data.write_text("[" + ", ".join(_mcq_line(f"q{i}", "i.png", "y" * 500) for i in range(40)) + "]", encoding="utf-8")
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("read past the cap"))
    with read_caps.using(line_mb=0.01), pytest.raises(EvalkitError) as err:
        load_jsonl(data)
    assert str(err.value) == (f"{data}: the file is 23 KB, over the 10 KB cap on one data line (--max-line-mb "
                              "raises it): a JSON file is read whole")


@pytest.mark.parametrize("stream", [False, True], ids=["csv", "streamed"])
def test_a_tsv_row_over_the_cap_is_one_line(tmp_path, stream):
    from evalkit.benchmarks.readers.mcq import load_tsv

    data = tmp_path / "set.tsv"
    rows = ["index\timage\tquestion\tA\tB\tanswer"] + [f"{i}\t{'Q' * 400}\tWhich?\tx\ty\tA" for i in range(3)]
    rows[2] = rows[2].replace("Which?", "W" * 30_000)
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with read_caps.using(line_mb=0.01), pytest.raises(EvalkitError) as err:
        load_tsv(data, stream=stream)
    assert str(err.value) == f"{data}: line 3 is over the 10 KB cap on one data line (--max-line-mb raises it)"


def test_an_image_over_the_cap_is_a_data_error_never_read(small_set, tmp_path, monkeypatch):
    from evalkit.images import pipeline as pipeline_module

    big = str(small_set.parent / "images" / "i2.png")
    pipe = ImagePipeline(max_image_bytes=50_000)
    monkeypatch.setattr(pipeline_module, "open_regular", lambda *_: pytest.fail("an image over the cap was opened"))
    try:
        with pytest.raises(DataError, match=r"^image .*i2\.png is 118 KB, over the 49 KB cap on one image "
                                             r"\(--max-image-mb raises it\)$"):
            pipe.prepare(ImagePart(ImageRef.from_path(big)))
    finally:
        pipe.close()
    monkeypatch.undo()
    with SimThread(SimConfig()) as sim:
        proc = run_main(["run", "mcq", "--data", str(small_set), "--model", "vllm/sim-model", "--base-url", sim.url,
                        "--max-image-mb", "0.05", "--no-cache", "--out", str(tmp_path / "run"), "--no-progress"],
                       env={"VLLM_API_KEY": "k", "COLUMNS": "400"})
        sent = sim.counters.snapshot()["requests"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert proc.returncode == 2 and sent == 3
    assert summary["data_errors"]["items"] == ["q2"] and summary["counts"]["data_errors"] == 1
    assert "i2.png is 118 KB, over the 51 KB cap on one image (--max-image-mb raises it)" in proc.stdout
    lint = run_main(["lint", "mcq", "--data", str(small_set), "--max-image-mb", "0.05", "--no-cache", "--json"])
    (too_big,) = [f for f in json.loads(lint.stdout)["findings"] if f["severity"] == "error"]
    assert too_big["kind"] == "image-too-big" and too_big["items"] == ["q2"]
    assert too_big["message"] == "the image is 118 KB, over the 51 KB cap on one image (--max-image-mb raises it)"


@pytest.mark.parametrize("command", ["run", "lint"])
def test_a_cap_must_be_positive(small_set, tmp_path, command):
    args = [command, "mcq", "--data", str(small_set), "--max-image-mb", "0"]
    if command == "run":
        args += ["--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "run")]
    proc = run_main(args, env={"VLLM_API_KEY": "k"})
    assert proc.returncode == 2 and proc.stderr.strip() == "evalkit: error: --max-image-mb must be more than 0, not 0"
