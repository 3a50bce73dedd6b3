"""Provider image limits: the table, fitting a transform to it, the byte-limit retry plan, the checks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.core.errors import EvalkitError
from evalkit.core.types import ImagePart, ImageRef, Transform
from evalkit.images.pipeline import ImagePipeline
from evalkit.images.provider_limits import (
    check_image_count,
    check_prepared,
    check_request_bytes,
    encoded_size,
    fit_transform,
    next_attempt,
    prepare_within,
)
from evalkit.providers.registry import RECORDS, limits_for

W, H = 9000, 6000


@pytest.fixture(scope="module")
def big_jpeg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 9000x6000 noise photo at JPEG quality 98: far over every provider's byte and size limits."""
    path = tmp_path_factory.mktemp("limits") / "big.jpg"
    noise = np.random.default_rng(0).integers(0, 256, (H, W, 3), dtype=np.uint8)
    Image.fromarray(noise).save(path, quality=98)
    assert path.stat().st_size >= 12 * 2**20
    return path


@pytest.fixture(scope="module")
def pipeline():
    pipe = ImagePipeline(max_image_bytes=2**30)  # the 80 MB photo is over the default cap (--max-image-mb 50)
    yield pipe
    pipe.close()


def _prepare(pipeline: ImagePipeline, path: Path, provider: str, limits=None):
    lim = limits or limits_for(provider)
    t = fit_transform(lim, Transform(), W, H, mime="image/jpeg", nbytes=path.stat().st_size)
    tried: list[Transform] = []

    def prep(tt: Transform):
        tried.append(tt)
        return pipeline.prepare(ImagePart(ImageRef.from_path(str(path)), tt))

    img, final = prepare_within(prep, t, lim, path.name)
    return img, final, tried


@pytest.mark.parametrize(("provider", "size"), [
    ("openai", (2048, 1365)),  # fit in 2048x2048 (high detail's first step)
    ("anthropic", (1312, 876)),  # 1568 long edge and <= 1.15 MP: the pixel budget binds
    ("google", (3072, 2048)),  # Gemini scales to fit 3072x3072
])
def test_big_image_fits_each_commercial_provider(big_jpeg, pipeline, provider, size):
    lim = limits_for(provider)
    img, final, tried = _prepare(pipeline, big_jpeg, provider)
    assert (img.width, img.height) == size  # the chosen size, reported
    assert img.mime == "image/jpeg" and final.fmt == "JPEG" and final.quality == 90
    assert encoded_size(len(img.data)) <= lim.max_bytes
    assert max(img.width, img.height) <= lim.max_side
    assert lim.max_pixels is None or img.width * img.height <= lim.max_pixels
    assert img.mime in lim.formats
    assert len(tried) == 1  # a downscaled photo is far under the byte limit at quality 90
    check_prepared(lim, len(img.data), img.width, img.height, img.mime, big_jpeg.name)


@pytest.fixture(scope="module")
def noise_png(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1200x800 noise as PNG: already inside Anthropic's sizes, so only its bytes are a problem."""
    path = tmp_path_factory.mktemp("limits") / "noise.png"
    noise = np.random.default_rng(1).integers(0, 256, (800, 1200, 3), dtype=np.uint8)
    Image.fromarray(noise).save(path)
    return path


def test_byte_limit_steps_quality_then_size(noise_png, pipeline):
    lim = replace(limits_for("anthropic"), max_bytes=500_000)  # q60 at full size is ~606 kB
    t = fit_transform(lim, Transform(), 1200, 800, mime="image/png", nbytes=noise_png.stat().st_size)
    assert t == Transform(fmt="JPEG")  # 2.9 MB of PNG: over the limit, so re-encode at full size
    tried: list[Transform] = []

    def prep(tt: Transform):
        tried.append(tt)
        return pipeline.prepare(ImagePart(ImageRef.from_path(str(noise_png)), tt))

    img, final = prepare_within(prep, t, lim, noise_png.name)
    assert [(x.quality, x.max_side) for x in tried] == [(90, None), (85, None), (75, None), (60, None), (60, 960)]
    assert final == Transform(fmt="JPEG", quality=60, max_side=960) and (img.width, img.height) == (960, 640)
    assert encoded_size(len(img.data)) <= 500_000


def test_byte_limit_that_cannot_be_met_names_image_and_limit(noise_png, pipeline):
    hopeless = replace(limits_for("google"), max_bytes=100)
    t = fit_transform(hopeless, Transform(), 1200, 800, nbytes=noise_png.stat().st_size)
    with pytest.raises(EvalkitError, match=r"^image noise\.png is [\d,]+ bytes as base64 after resizing; "
                                           r"google accepts at most 100 per image$"):
        prepare_within(lambda tt: pipeline.prepare(ImagePart(ImageRef.from_path(str(noise_png)), tt)),
                       t, hopeless, noise_png.name)


def test_vllm_and_unknown_providers_leave_the_transform_alone():
    t = Transform(rotate=90, max_side=1000)
    assert fit_transform(limits_for("vllm"), t, W, H, nbytes=10**9) == t
    assert fit_transform(limits_for("openai-compatible"), Transform(), W, H) == Transform()
    assert limits_for("nobody") is None and fit_transform(None, t, W, H) == t


def test_user_max_side_tighter_than_provider_wins():
    t = fit_transform(limits_for("anthropic"), Transform(max_side=800), W, H)
    assert t == Transform(max_side=800)  # the provider's caps do not bind at 800x533: unchanged
    t = fit_transform(limits_for("openai"), Transform(max_side=4000), W, H)
    assert t.max_side == 2048  # the provider's is tighter
    t = fit_transform(limits_for("anthropic"), Transform(max_pixels=500_000), W, H)
    assert t.max_pixels == 500_000 and t.max_side is None


def test_small_accepted_image_stays_a_passthrough():
    assert fit_transform(limits_for("anthropic"), Transform(), 800, 600, mime="image/png", nbytes=90_000) == Transform()


def test_reencode_when_format_or_bytes_not_accepted():
    assert fit_transform(limits_for("google"), Transform(), 800, 600, mime="image/gif").fmt == "JPEG"
    assert fit_transform(limits_for("openai"), Transform(), 800, 600, mime="image/bmp").fmt == "JPEG"
    assert fit_transform(limits_for("anthropic"), Transform(), 1000, 1000, nbytes=4_000_000).fmt == "JPEG"
    assert fit_transform(limits_for("anthropic"), Transform(fmt="PNG"), 4000, 3000).fmt == "PNG"  # user's choice


def test_crop_and_rotation_are_measured_after_the_crop():
    crop = Transform(crop=(0, 0, 1000, 1000))  # a 1000x1000 region of a huge image: no resize needed
    assert fit_transform(limits_for("anthropic"), crop, W, H) == crop
    rotated = fit_transform(limits_for("openai"), Transform(rotate=90), 1500, 2500)
    assert rotated.max_side == 2048 and rotated.fmt == "JPEG"


def test_exact_size_is_scaled_down_to_the_limits():
    t = fit_transform(limits_for("anthropic"), Transform(size=(4000, 2000)), W, H)
    assert t.size == (1517, 758) and t.size[0] * t.size[1] <= 1_150_000 and t.fmt == "JPEG"
    assert fit_transform(limits_for("anthropic"), Transform(size=(512, 512)), W, H) == Transform(size=(512, 512))


def test_next_attempt_plan():
    t = Transform(max_side=1000)
    steps = []
    while t is not None and len(steps) < 50:
        steps.append((t.fmt, t.quality, t.max_side))
        t = next_attempt(t, None)
    assert steps[:6] == [(None, 90, 1000), ("JPEG", 90, 1000), ("JPEG", 85, 1000), ("JPEG", 75, 1000),
                         ("JPEG", 60, 1000), ("JPEG", 60, 800)]
    assert steps[-1][2] >= 64 and next_attempt(Transform(fmt="JPEG", quality=60, max_side=70)) is None
    # the size the last attempt produced counts when the cap did not bind (or there was none)
    assert next_attempt(Transform(fmt="JPEG", quality=60), (500, 250)).max_side == 400
    assert next_attempt(Transform(fmt="JPEG", quality=60, max_side=3072), (1000, 800)).max_side == 800
    assert next_attempt(Transform(fmt="JPEG", quality=60), None) is None
    assert next_attempt(Transform(fmt="JPEG", quality=60, size=(100, 100))).size == (80, 80)
    shrunk = next_attempt(Transform(fmt="JPEG", quality=60, max_side=1568, max_pixels=1_000_000), (1200, 800))
    assert shrunk.max_side == 960 and shrunk.max_pixels == 640_000


def test_check_prepared_errors_are_one_line_and_name_the_limit():
    lim = limits_for("anthropic")
    check_prepared(lim, 3_000_000, 1568, 1000, "image/jpeg", "a.jpg")
    with pytest.raises(EvalkitError, match=r"image a\.jpg is 5,333,336 bytes as base64.*at most 5,000,000"):
        check_prepared(lim, 4_000_000, 1000, 1000, "image/jpeg", "a.jpg")
    with pytest.raises(EvalkitError, match=r"image a\.tif is image/tiff; anthropic accepts image/jpeg"):
        check_prepared(lim, 1000, 10, 10, "image/tiff", "a.tif")
    with pytest.raises(EvalkitError, match=r"^image wide\.png is 9000x10; anthropic rejects sides above 8000 px$"):
        check_prepared(lim, 1000, 9000, 10, "image/png", "wide.png")
    check_prepared(lim, 1000, 2000, 10, "image/jpg", "x")  # image/jpg is JPEG
    with pytest.raises(EvalkitError, match=r"above 2000 px with 21 images in one request"):
        check_prepared(lim, 1000, 2001, 10, "image/png", "p.png", n_images=21)
    check_prepared(None, 10**12, 10**6, 10**6, "image/x", "anything")


def test_image_count_errors_name_the_count_and_the_limit():
    check_image_count(limits_for("anthropic"), 100, "item 7")
    with pytest.raises(EvalkitError, match=r"^item 7: 101 images in one request; anthropic accepts at most 100 "):
        check_image_count(limits_for("anthropic"), 101, "item 7")
    with pytest.raises(EvalkitError, match=r"501 images .* openai accepts at most 500"):
        check_image_count(limits_for("openai"), 501, "q1")
    check_image_count(limits_for("vllm"), 10_000, "q1")
    check_image_count(None, 10_000, "q1")


def test_request_bytes():
    check_request_bytes(limits_for("google"), 14_000_000, "q1")  # 18.7 MB as base64
    with pytest.raises(EvalkitError, match=r"q1: images total 20,000,004 bytes as base64; google accepts at most 20,000,000"):
        check_request_bytes(limits_for("google"), 15_000_003, "q1")


def test_table_is_dated_and_sourced():
    LIMITS = {name: record.image_limits for name, record in RECORDS.items()}  # noqa: N806
    for name in ("openai", "anthropic", "google"):
        lim = LIMITS[name]
        assert lim.source.startswith("https://") and lim.read_on == "2026-11-22" and lim.name == name
        assert lim.max_bytes and lim.max_side and lim.max_images and lim.formats
    assert (LIMITS["anthropic"].max_side, LIMITS["openai"].max_side, LIMITS["google"].max_side) == (1568, 2048, 3072)
    assert (LIMITS["anthropic"].max_images, LIMITS["openai"].max_images, LIMITS["google"].max_images) == (100, 500, 3000)
