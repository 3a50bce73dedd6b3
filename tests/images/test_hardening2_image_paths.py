"""An image path that is a named pipe (FIFO) or a symlink loop is said as such, and never blocks.

Both were reported "image file not found" (`Path.is_file()` is False for them as for a missing
file), and opening a FIFO waits for a writer forever: the image pipeline, the data fingerprint and
`evalkit view` would hang on one. Now the loaders and lint say "image is not a regular file (a named
pipe)" or "image path is a symlink loop", and every open of an image file refuses a FIFO at once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from cli_under_test import run_cli
from synthetic_data import make_mcq_jsonl

from evalkit.core.errors import EvalkitError
from evalkit.core.types import ImageRef
from evalkit.images.pipeline import ImagePipeline
from evalkit.rundir.identity import FileHashes

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need a POSIX system")


@pytest.fixture
def data(tmp_path):
    """Three questions: the second's image a FIFO, the third's a symlink into a loop."""
    path = make_mcq_jsonl(tmp_path / "ds", 3, seed=1)
    images = tmp_path / "ds" / "images"
    (images / "img00001.png").unlink()
    os.mkfifo(images / "img00001.png")
    (images / "img00002.png").unlink()
    (images / "loop-a.png").symlink_to("loop-b.png")
    (images / "loop-b.png").symlink_to("loop-a.png")
    (images / "img00002.png").symlink_to("loop-a.png")
    return path


def _only_line(done) -> str:  # noqa: ANN001
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_run_names_a_fifo(data, tmp_path):
    done = run_cli(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--data", str(data),
                    "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"], timeout=120)  # a bound on a hang
    fifo = tmp_path / "ds" / "images" / "img00001.png"
    assert done.returncode == 2
    assert _only_line(done) == f"evalkit: error: {data}: line 2: image is not a regular file (a named pipe): {fifo}"


def test_run_names_a_symlink_loop(data, tmp_path):
    (tmp_path / "ds" / "images" / "img00001.png").unlink()
    make_mcq_jsonl(tmp_path / "fresh", 3, seed=1)
    os.replace(tmp_path / "fresh" / "images" / "img00001.png", tmp_path / "ds" / "images" / "img00001.png")
    done = run_cli(["run", "mcq", "--model", "vllm/m", "--base-url", "http://127.0.0.1:9/v1", "--data", str(data),
                    "--out", str(tmp_path / "run"), "--no-cache", "--no-progress"], timeout=120)
    loop = tmp_path / "ds" / "images" / "img00002.png"
    assert done.returncode == 2
    assert _only_line(done) == f"evalkit: error: {data}: line 3: image path is a symlink loop: {loop}"


def test_lint_names_both(data, tmp_path):
    done = run_cli(["lint", "mcq", "--data", str(data), "--json"], timeout=120)
    assert done.returncode == 1, done.stderr
    assert "image is not a regular file (a named pipe)" in done.stdout
    assert "image path is a symlink loop" in done.stdout
    assert "not found" not in done.stdout and "zero bytes" not in done.stdout


def _never_blocks(fn, fifo: Path):  # noqa: ANN001, ANN202
    """fn() in a thread; if it is still waiting on the FIFO after a generous bound, a writer releases it."""
    out: list[BaseException | object] = []

    def call() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.append(e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(60)  # a bound on a hang only
    blocked = thread.is_alive()
    if blocked:  # the old behaviour: open() waits for a writer; give it one so the thread ends
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(60)
    assert not blocked, "opening the FIFO blocked"
    return out[0]


def test_the_pipeline_and_the_hashes_refuse_a_fifo_at_once(data, tmp_path):
    fifo = tmp_path / "ds" / "images" / "img00001.png"
    pipeline = ImagePipeline()
    try:
        for fn in (lambda: pipeline.source_bytes(ImageRef.from_path(str(fifo))),
                   lambda: pipeline.header(ImageRef.from_path(str(fifo))),
                   lambda: pipeline.source_hash(ImageRef.from_path(str(fifo)))):
            error = _never_blocks(fn, fifo)
            assert isinstance(error, EvalkitError), error
            assert str(error) == f"cannot read image {fifo}: not a regular file (a named pipe)"
        error = _never_blocks(lambda: FileHashes().sha256(str(fifo)), fifo)
        assert isinstance(error, OSError) and str(error) == "not a regular file (a named pipe)"
        loop = tmp_path / "ds" / "images" / "img00002.png"
        with pytest.raises(EvalkitError, match=r"^cannot read image .*img00002.png: a symlink loop$"):
            pipeline.source_bytes(ImageRef.from_path(str(loop)))
    finally:
        pipeline.close()
