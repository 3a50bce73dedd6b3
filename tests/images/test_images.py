"""The image pipeline: orientation, colour modes, geometry, draft decoding, memo and errors."""

from __future__ import annotations

import base64
import io
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.core.errors import EvalkitError
from evalkit.core.fingerprint import distance, fingerprint_bytes
from evalkit.core.types import ImagePart, ImageRef, Transform
from evalkit.images.pipeline import ImagePipeline, PreparedImage, fit_size, rotate_image, to_rgb

RED, BLUE, GREEN, WHITE = (255, 0, 0), (0, 0, 255), (0, 255, 0), (255, 255, 255)


def picture(w: int, h: int, seed: int = 0) -> Image.Image:
    """A smooth, detailed RGB test picture (gradients plus a few blocks) that JPEG keeps recognisable."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    arr = np.stack([255 * x / w, 255 * y / h, 128 + 100 * np.sin((x + y) / (w / 6 + 1))], axis=-1)
    for _ in range(6):
        x0, y0 = rng.integers(0, w * 3 // 4), rng.integers(0, h * 3 // 4)
        arr[y0 : y0 + h // 5, x0 : x0 + w // 5] = rng.integers(0, 256, 3)
    return Image.fromarray(arr.clip(0, 255).astype(np.uint8))


def encoded(img: Image.Image, fmt: str = "PNG", **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def decode(p: PreparedImage) -> Image.Image:
    img = Image.open(io.BytesIO(p.data))
    img.load()
    return img


def write(tmp_path: Path, name: str, data: bytes) -> ImageRef:
    path = tmp_path / name
    path.write_bytes(data)
    return ImageRef.from_path(str(path))


def near(px: tuple[int, ...], want: tuple[int, int, int], tol: int = 40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(px[:3], want, strict=True))


# ---------------------------------------------------------------- pure helpers


def test_fit_size_math() -> None:
    assert fit_size(4000, 3000, 2048, None) == (2048, 1536)
    assert fit_size(3000, 4000, 2048, None) == (1536, 2048)
    assert fit_size(100, 50, 2048, None) == (100, 50)  # never upscale
    assert fit_size(100, 50, None, 10**6) == (100, 50)
    assert fit_size(100, 50) == (100, 50)
    w, h = fit_size(4000, 3000, None, 1_000_000)
    assert w * h <= 1_000_000 and w * h > 990_000 and abs(w / h - 4 / 3) < 0.01
    w, h = fit_size(4000, 3000, 1000, 500_000)  # both limits: the tighter wins
    assert max(w, h) <= 1000 and w * h <= 500_000
    assert fit_size(10000, 1, 100, None) == (100, 1)  # never below one pixel
    for w0, h0 in [(1999, 1001), (7, 3333), (4096, 4096), (1234, 567)]:
        w, h = fit_size(w0, h0, 777, 300_000)
        assert max(w, h) <= 777 and w * h <= 300_000
    with pytest.raises(EvalkitError):
        fit_size(100, 100, 0, None)


def test_to_rgb_modes() -> None:
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 255))
    rgba.putpixel((0, 0), (0, 0, 0, 0))  # fully transparent black -> white
    out = to_rgb(rgba)
    assert out.mode == "RGB" and out.getpixel((0, 0)) == WHITE and out.getpixel((1, 1)) == RED

    la = Image.new("LA", (2, 2), (0, 0))
    assert to_rgb(la).getpixel((0, 0)) == WHITE

    p = Image.new("P", (2, 2), 0)
    p.putpalette([0, 0, 255] + [0, 255, 0] + [0] * 762)
    p.putpixel((1, 1), 1)
    assert to_rgb(p).getpixel((0, 0)) == BLUE and to_rgb(p).getpixel((1, 1)) == GREEN
    p.info["transparency"] = 0
    assert to_rgb(p).getpixel((0, 0)) == WHITE and to_rgb(p).getpixel((1, 1)) == GREEN

    assert to_rgb(Image.new("L", (2, 2), 77)).getpixel((0, 0)) == (77, 77, 77)
    cmyk = to_rgb(Image.new("CMYK", (2, 2), (0, 255, 255, 0)))
    assert cmyk.mode == "RGB" and cmyk.getpixel((0, 0)) == RED

    i16 = Image.fromarray(np.array([[0, 65535], [32896, 65535]], dtype=np.uint16))
    assert i16.mode.startswith("I;16")
    out = to_rgb(i16)
    assert out.getpixel((0, 0)) == (0, 0, 0) and out.getpixel((1, 0)) == WHITE
    assert out.getpixel((0, 1)) == (128, 128, 128)  # scaled, not clipped to white


def test_rotate_image_is_counter_clockwise() -> None:
    img = Image.new("RGB", (40, 20), WHITE)
    img.paste(RED, (0, 0, 5, 5))  # top-left corner
    r90 = rotate_image(img, 90)
    assert r90.size == (20, 40) and r90.getpixel((1, 38)) == RED  # CCW: top-left -> bottom-left
    r270 = rotate_image(img, -90)
    assert r270.size == (20, 40) and r270.getpixel((18, 1)) == RED  # CW: top-left -> top-right
    assert rotate_image(img, 180).getpixel((38, 18)) == RED
    assert rotate_image(img, 0) is img
    assert rotate_image(img, 30).size[0] > 40  # arbitrary angles expand


# ---------------------------------------------------------------- decoding


def test_exif_orientation_is_honoured(tmp_path: Path) -> None:
    raw = Image.new("RGB", (40, 20), RED)
    raw.paste(BLUE, (20, 0, 40, 20))  # left red, right blue as stored
    exif = Image.Exif()
    exif[0x0112] = 6  # display = stored rotated 90 degrees clockwise
    ref = write(tmp_path, "o.jpg", encoded(raw, "JPEG", exif=exif.tobytes(), quality=95))
    pipe = ImagePipeline()
    img = pipe.open(ref)
    assert img.size == (20, 40)
    assert near(img.getpixel((10, 5)), RED) and near(img.getpixel((10, 35)), BLUE)
    prepared = pipe.prepare(ImagePart(ref))  # identity, but the bytes must be re-oriented
    assert (prepared.width, prepared.height) == (20, 40) and pipe.stats.passthrough == 0
    assert near(decode(prepared).getpixel((10, 35)), BLUE)


def test_transparent_png_is_composited_on_white(tmp_path: Path) -> None:
    img = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    img.paste((0, 255, 0, 255), (0, 0, 4, 8))
    ref = write(tmp_path, "a.png", encoded(img))
    pipe = ImagePipeline()
    rgb = pipe.open(ref)
    assert rgb.mode == "RGB" and rgb.getpixel((6, 4)) == WHITE and rgb.getpixel((1, 4)) == GREEN
    out = pipe.prepare(ImagePart(ref))  # alpha sources are re-encoded, losslessly, without alpha
    assert out.mime == "image/png" and decode(out).mode == "RGB" and decode(out).getpixel((6, 4)) == WHITE


def test_jpeg_draft_decodes_big_images_at_reduced_scale(tmp_path: Path) -> None:
    big = picture(1600, 1200, seed=1)
    ref = write(tmp_path, "big.jpg", encoded(big, "JPEG", quality=90))
    pipe = ImagePipeline()
    assert pipe.open(ref, draft_size=(200, 150)).size == (200, 150)
    assert pipe.open(ref, draft_size=(300, 200)).size == (400, 300)  # never below the request
    assert pipe.open(ref).size == (1600, 1200)

    pipe = ImagePipeline()
    out = pipe.prepare(ImagePart(ref, Transform(max_side=400)))
    assert (out.width, out.height) == (400, 300) and out.mime == "image/jpeg"
    assert pipe.stats.decodes == 1 and pipe.stats.decoded_pixels == 400 * 300  # not 1600x1200
    ref_small = np.asarray(big.resize((400, 300), Image.Resampling.LANCZOS), dtype=np.int16)
    assert np.abs(np.asarray(decode(out), dtype=np.int16) - ref_small).mean() < 6

    # A crop keeps its resolution: only what the crop region allows is dropped.
    out = pipe.prepare(ImagePart(ref, Transform(crop=(400, 300, 1200, 900), max_side=200, fmt="PNG")))
    assert (out.width, out.height) == (200, 150)
    assert pipe.stats.decoded_pixels == 400 * 300 + 400 * 300  # 1/4 scale: region 200x150
    want = np.asarray(big.crop((400, 300, 1200, 900)).resize((200, 150), Image.Resampling.LANCZOS))
    assert np.abs(np.asarray(decode(out), dtype=np.int16) - want).mean() < 6


def test_draft_respects_exif_orientation(tmp_path: Path) -> None:
    big = picture(1600, 1200, seed=4)
    exif = Image.Exif()
    exif[0x0112] = 8  # display = stored rotated 90 degrees counter-clockwise
    ref = write(tmp_path, "ob.jpg", encoded(big, "JPEG", exif=exif.tobytes(), quality=90))
    pipe = ImagePipeline()
    out = pipe.prepare(ImagePart(ref, Transform(max_side=400, fmt="PNG")))
    assert (out.width, out.height) == (300, 400) and pipe.stats.decoded_pixels == 400 * 300
    want = np.asarray(rotate_image(big, 90).resize((300, 400), Image.Resampling.LANCZOS), dtype=np.int16)
    assert np.abs(np.asarray(decode(out), dtype=np.int16) - want).mean() < 6


# ---------------------------------------------------------------- transforms


def test_rotate_90_swaps_size_and_moves_the_corner(tmp_path: Path) -> None:
    img = Image.new("RGB", (40, 20), WHITE)
    img.paste(RED, (0, 0, 6, 6))
    ref = write(tmp_path, "r.png", encoded(img))
    out = ImagePipeline().prepare(ImagePart(ref, Transform(rotate=90, fmt="PNG")))
    assert (out.width, out.height) == (20, 40) and out.mime == "image/png"
    px = decode(out)
    assert px.size == (20, 40) and px.getpixel((1, 38)) == RED and px.getpixel((1, 1)) == WHITE


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
def test_rotate_then_crop_is_pixel_exact(tmp_path: Path, rotate: int) -> None:
    img = picture(60, 40, seed=3)
    ref = write(tmp_path, "c.png", encoded(img))
    crop = (5, 7, 25, 33)
    out = ImagePipeline().prepare(ImagePart(ref, Transform(rotate=rotate, crop=crop, fmt="PNG")))
    want = rotate_image(img, rotate).crop(crop)
    assert (out.width, out.height) == want.size
    assert np.array_equal(np.asarray(decode(out)), np.asarray(want))


def test_crop_clamps_and_rejects_empty(tmp_path: Path) -> None:
    ref = write(tmp_path, "c.png", encoded(picture(50, 30)))
    pipe = ImagePipeline()
    out = pipe.prepare(ImagePart(ref, Transform(crop=(40, 20, 80, 90), fmt="PNG")))
    assert (out.width, out.height) == (10, 10)
    with pytest.raises(EvalkitError, match="c.png"):
        pipe.prepare(ImagePart(ref, Transform(crop=(60, 0, 70, 10))))


def test_max_side_max_pixels_and_size(tmp_path: Path) -> None:
    ref = write(tmp_path, "m.png", encoded(picture(400, 300)))
    pipe = ImagePipeline()

    def dims(t: Transform) -> tuple[int, int]:
        p = pipe.prepare(ImagePart(ref, t))
        assert decode(p).size == (p.width, p.height)
        return p.width, p.height

    assert dims(Transform(max_side=200)) == (200, 150)
    assert dims(Transform(max_side=1000)) == (400, 300)  # never upscale
    w, h = dims(Transform(max_pixels=30_000))
    assert w * h <= 30_000 and abs(w / h - 4 / 3) < 0.02
    assert dims(Transform(size=(64, 64))) == (64, 64)
    assert dims(Transform(size=(512, 512))) == (512, 512)  # exact size may upscale
    assert dims(Transform(rotate=90, max_side=200)) == (150, 200)
    w, h = dims(Transform(rotate=45, max_side=200))  # arbitrary angles expand, then fit
    assert max(w, h) == 200 and abs(w - h) < 30


def test_identity_sends_the_source_bytes(tmp_path: Path) -> None:
    pipe = ImagePipeline()
    for name, fmt, mime in [("i.jpg", "JPEG", "image/jpeg"), ("i.png", "PNG", "image/png")]:
        data = encoded(picture(64, 48), fmt)
        out = pipe.prepare(ImagePart(write(tmp_path, name, data)))
        assert out.data == data and out.mime == mime and (out.width, out.height) == (64, 48)
    assert pipe.stats.decodes == 0 and pipe.stats.passthrough == 2
    reencoded = pipe.prepare(ImagePart(ImageRef.from_bytes(data), Transform(fmt="JPEG", quality=50)))
    assert reencoded.mime == "image/jpeg" and reencoded.data != data and pipe.stats.decodes == 1


# ---------------------------------------------------------------- memo


def test_memo_hit_and_lru_eviction(tmp_path: Path) -> None:
    refs = [write(tmp_path, f"{i}.png", encoded(picture(200, 150, seed=i))) for i in range(3)]
    t = Transform(max_side=100, fmt="PNG")
    probe = ImagePipeline().prepare(ImagePart(refs[0], t))
    pipe = ImagePipeline(max_bytes=int(probe.nbytes * 2.5))

    first = pipe.prepare(ImagePart(refs[0], t))
    assert pipe.prepare(ImagePart(refs[0], t)) is first
    assert (pipe.stats.memo_hits, pipe.stats.memo_misses, pipe.stats.decodes) == (1, 1, 1)
    assert first.data_uri() is first.data_uri() and first.data_uri().startswith("data:image/png;base64,")
    assert base64.b64decode(first.b64()) == first.data

    pipe.prepare(ImagePart(refs[1], t))
    pipe.prepare(ImagePart(refs[0], t))  # refresh 0: 1 is now least recently used
    pipe.prepare(ImagePart(refs[2], t))
    assert pipe.stats.evictions == 1 and pipe.stats.memo_bytes <= int(probe.nbytes * 2.5)
    decodes = pipe.stats.decodes
    pipe.prepare(ImagePart(refs[0], t))
    assert pipe.stats.decodes == decodes  # still there
    pipe.prepare(ImagePart(refs[1], t))
    assert pipe.stats.decodes == decodes + 1  # was evicted


def test_concurrent_prepares_decode_once(tmp_path: Path) -> None:
    ref = write(tmp_path, "c.jpg", encoded(picture(800, 600), "JPEG"))
    pipe = ImagePipeline()
    part = ImagePart(ref, Transform(max_side=300))
    results: list[PreparedImage] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        results.append(pipe.prepare(part))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert pipe.stats.decodes == 1 and pipe.stats.memo_misses == 1


def test_b64_and_bytes_sources_match_path(tmp_path: Path) -> None:
    data = encoded(picture(80, 60), "PNG")
    by_path, by_bytes = write(tmp_path, "s.png", data), ImageRef.from_bytes(data)
    by_b64 = ImageRef.from_b64(base64.b64encode(data).decode())
    pipe = ImagePipeline()
    assert pipe.source_bytes(by_b64) == pipe.source_bytes(by_path) == data
    hashes = {pipe.source_hash(r) for r in (by_path, by_bytes, by_b64)}
    assert len(hashes) == 1  # the identity of an image is its bytes, not where they came from
    t = Transform(max_side=40)
    outs = [pipe.prepare(ImagePart(r, t)) for r in (by_path, by_bytes, by_b64)]
    assert outs[0] is outs[1] is outs[2] and pipe.stats.decodes == 1
    assert pipe.prepare(ImagePart(by_b64)).data == data


def test_source_hash_follows_file_changes_between_runs(tmp_path: Path) -> None:
    """A pipeline lives for one run and stats each file once; the next run's pipeline sees the change."""
    ref = write(tmp_path, "f.png", encoded(picture(20, 20, seed=1)))
    pipe = ImagePipeline()
    before = pipe.source_hash(ref)
    Path(str(ref.value)).write_bytes(encoded(picture(21, 20, seed=2)))
    assert pipe.source_hash(ref) == before  # as first seen in this run: the bytes sent match the hash
    assert ImagePipeline().source_hash(ref) != before


# ---------------------------------------------------------------- fingerprints


def test_fingerprint_survives_resize_and_reencode(tmp_path: Path) -> None:
    img = picture(640, 480, seed=5)
    ref = write(tmp_path, "f.png", encoded(img))
    copy = ImageRef.from_bytes(encoded(img.resize((320, 240)), "JPEG", quality=60))
    other = write(
        tmp_path, "g.png", encoded(picture(640, 480, seed=6).transpose(Image.Transpose.FLIP_LEFT_RIGHT))
    )
    pipe = ImagePipeline()
    fp = pipe.fingerprint(ImagePart(ref))
    assert distance(fp, pipe.fingerprint(ImagePart(copy))) < 8
    assert distance(fp, pipe.fingerprint(ImagePart(other))) > 20

    # What the simulator computes from the bytes it receives matches the pipeline's fingerprint.
    for t in [Transform(max_side=200), Transform(rotate=90, crop=(10, 20, 300, 400), max_side=150)]:
        part = ImagePart(ref, t)
        sent = pipe.prepare(part)
        assert distance(pipe.fingerprint(part), fingerprint_bytes(sent.data)) < 8
        assert distance(ImagePipeline().fingerprint(part), fingerprint_bytes(sent.data)) < 8
    assert distance(fp, pipe.fingerprint(ImagePart(ref, Transform(rotate=90)))) > 20


def test_fingerprint_of_big_jpeg_uses_a_small_decode(tmp_path: Path) -> None:
    big = picture(1600, 1200, seed=2)
    ref = write(tmp_path, "b.jpg", encoded(big, "JPEG"))
    pipe = ImagePipeline()
    fp = pipe.fingerprint(ImagePart(ref, Transform(max_side=512)))  # resize does not matter
    assert pipe.stats.fp_decodes == 1 and pipe.stats.decodes == 0
    assert pipe.fingerprint(ImagePart(ref)) == fp and pipe.stats.fp_decodes == 1
    assert distance(fp, fingerprint_bytes(encoded(big, "PNG"))) < 4


# ---------------------------------------------------------------- errors


def test_errors_name_the_culprit(tmp_path: Path) -> None:
    pipe = ImagePipeline()
    missing = str(tmp_path / "nope.jpg")
    with pytest.raises(EvalkitError, match=f"image not found: {missing}"):
        pipe.prepare(ImagePart(ImageRef.from_path(missing)))
    with pytest.raises(EvalkitError, match="image not found"):
        pipe.fingerprint(ImagePart(ImageRef.from_path(missing)))

    corrupt = write(tmp_path, "bad.png", b"this is not an image at all")
    with pytest.raises(EvalkitError, match=r"cannot read image .*bad\.png"):
        pipe.prepare(ImagePart(corrupt))

    truncated = write(tmp_path, "trunc.jpg", encoded(picture(200, 200), "JPEG")[:400])
    with pytest.raises(EvalkitError, match=r"cannot read image .*trunc\.jpg") as exc:
        pipe.prepare(ImagePart(truncated, Transform(max_side=50)))
    assert "\n" not in str(exc.value)

    with pytest.raises(EvalkitError, match="cannot read image <bytes image"):
        pipe.open(ImageRef.from_bytes(b"\x89PNG garbage"))
    with pytest.raises(EvalkitError, match="cannot read image <b64 image.*base64"):
        pipe.source_bytes(ImageRef.from_b64("abc"))
    with pytest.raises(EvalkitError, match="unsupported image format"):
        pipe.prepare(ImagePart(write(tmp_path, "ok.png", encoded(picture(8, 8))), Transform(fmt="BMP")))
