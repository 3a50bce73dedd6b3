"""The image pipeline: ImagePart(ref, transform) -> the encoded bytes sent to a model.

Image work is the expensive part of asking a VLM, and the same image is sent many times
(circular shifts, languages, retries), so everything here is memoised by the sha256 of the
source bytes plus the transform. Only encoded bytes are kept (never decoded pixels), the
memo is bounded by bytes, and concurrent callers of the same key wait for one computation.
Big JPEGs are decoded at reduced scale (Image.draft) when they will be downscaled anyway (region.py).
"""

from __future__ import annotations

import binascii
import hashlib
import io
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from evalkit.core import read_caps
from evalkit.core.errors import DataError, EvalkitError
from evalkit.core.inline import b64_bytes, inline_bytes, inline_size, span_text
from evalkit.core.memo import BoundedMemo
from evalkit.core.types import ImagePart, ImageRef, Transform
from evalkit.images import bomb
from evalkit.images.files import open_regular, read_problem
from evalkit.images.ops import (
    _ALPHA_MODES,
    _FP_MEMO_BYTES,
    _FP_SIDE,
    _HASH_MEMO_BYTES,
    MIME,
    _decode,
    _decode_errors,
    _norm_fmt,
    _orientation,
    encode,
)
from evalkit.images.ops import fit_size as fit_size  # re-exported, with the two below: the images API
from evalkit.images.ops import rotate_image as rotate_image
from evalkit.images.ops import to_rgb as to_rgb
from evalkit.images.prepared import PreparedImage as PreparedImage  # re-exported: where providers import it
from evalkit.images.region import Plan, decode_region

if TYPE_CHECKING:
    from PIL import Image

T = TypeVar("T")


MEMO_BYTES = 128 * 2**20  # prepared images kept for reuse (the same picture's other variants, asked next to it)
SPAN_MEMO_BYTES = 64 * 2**20  # source bytes of the images last read from a data file's spans


@dataclass(frozen=True)
class ImageHeader:
    width: int
    height: int
    mime: str
    nbytes: int


@dataclass
class ImageStats:
    """Counters that show the pipeline is doing each piece of work once."""

    decodes: int = 0  # full decodes made by prepare()
    decoded_pixels: int = 0  # pixels those decodes produced (smaller than the source when draft works)
    fp_decodes: int = 0  # reduced-scale decodes made only for fingerprints
    passthrough: int = 0  # identity transforms served with the source bytes
    memo_hits: int = 0
    memo_misses: int = 0
    memo_bytes: int = 0
    evictions: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


# ---------------------------------------------------------------- the pipeline


class ImagePipeline:
    """Turns ImageParts into PreparedImages; thread-safe, memoised, memory-bounded.

    All pixel work runs on `workers` threads owned by the pipeline (default: min(2, CPUs)),
    whatever thread calls it. Decoding is CPU-bound, so more threads only add peak memory (a
    4000x3000 RGB decode is 36 MB), and glibc keeps freed memory in per-thread arenas: big
    buffers allocated from every asyncio.to_thread worker nearly doubled peak RSS in tests.
    """

    def __init__(self, max_bytes: int = MEMO_BYTES, *, workers: int | None = None,
                 max_image_bytes: int = read_caps.DEFAULT.image_bytes):
        self.stats = ImageStats()
        self.max_image_bytes = max_image_bytes  # a bigger stored image is refused before it is read
        self._prepared: BoundedMemo[tuple[str, Transform], PreparedImage] = BoundedMemo(
            max_bytes, lambda _k, p: p.nbytes, self.stats
        )
        self._fps: BoundedMemo[tuple[str, int, Any], str] = BoundedMemo(_FP_MEMO_BYTES, lambda _k, s: len(s) + 100)
        self._headers: BoundedMemo[str, ImageHeader] = BoundedMemo(_FP_MEMO_BYTES, lambda _k, _h: 200)
        self._hashes: BoundedMemo[tuple[Any, ...], str] = BoundedMemo(
            _HASH_MEMO_BYTES, lambda k, _s: 200 + (0 if k[0] == "path" else len(k[1]))
        )
        # the bytes of the spans of a data file read last (saved_index.py: a run reads only its items' bytes, once)
        self._spans: BoundedMemo[str, bytes] = BoundedMemo(SPAN_MEMO_BYTES, lambda k, b: len(k) + len(b))
        self._span_shas: dict[str, str] = {}
        # path -> (mtime, size) as first seen by this pipeline: one stat per file per run, not per query
        # (a stat on the event loop waits for the GIL behind busy threads; files do not change mid-run)
        self._file_keys: dict[str, tuple[Any, ...]] = {}
        self._stats_lock = threading.Lock()
        n = workers or max(1, min(2, os.cpu_count() or 1))
        self._workers = ThreadPoolExecutor(n, thread_name_prefix="evalkit-image")

    def _on_worker(self, fn: Callable[[], T]) -> T:
        """Run pixel work on the pipeline's own few threads (see the class docstring)."""
        return self._workers.submit(fn).result()

    def close(self) -> None:
        """Stop the worker threads (idle ones cost nothing; this is for tidy shutdowns)."""
        self._workers.shutdown(wait=True)

    # -- sources

    def source_bytes(self, ref: ImageRef) -> bytes:
        """The encoded bytes as stored: file content, decoded base64 (a cell, or a span of a data
        file read now), or the raw bytes."""
        self._check_size(ref)
        if ref.kind == "bytes":
            return inline_bytes(ref)
        if ref.kind in ("b64", "span"):
            try:
                with self._reading(ref):  # a span's data file: gone or changed is a read error
                    if ref.kind == "span":  # read once for the hash, header, decode and fingerprint of its query
                        return self._spans.get_or_compute(str(ref.value), lambda: b64_bytes(span_text(ref)))
                    text = ref.value
                return b64_bytes(text)
            except (binascii.Error, ValueError) as e:
                raise DataError(f"cannot read image {ref.describe()}: bad base64 ({e})") from e
        path = str(ref.value)
        with self._reading(ref), open_regular(path) as f:
            return f.read()

    def _file_key(self, path: str) -> tuple[Any, ...]:
        """The hash memo's key for a file: its path, mtime and size, stat-ed once by this pipeline."""
        key = self._file_keys.get(path)
        if key is None:
            st = os.stat(path)
            key = self._file_keys[path] = ("path", path, st.st_mtime_ns, st.st_size)
        return key

    def _check_size(self, ref: ImageRef) -> None:
        """DataError for an image stored over the cap (--max-image-mb), found before a byte is read:
        a file by its size, an inline image by its text's length."""
        try:
            size = self._file_key(str(ref.value))[3] if ref.kind == "path" else inline_size(ref)
        except OSError:
            return  # reading it says why it cannot be read
        if size > self.max_image_bytes:
            raise DataError(read_caps.image_over(ref.describe(), size, self.max_image_bytes))

    def source_hash(self, ref: ImageRef) -> str:
        """sha256 of the source bytes (the image's cache identity), memoised."""
        self._check_size(ref)
        if ref.kind == "path":
            try:
                key: tuple[Any, ...] = self._file_key(str(ref.value))
            except OSError:
                with self._reading(ref):  # the error, named as every read error is
                    raise
            return self._hashes.get_or_compute(key, lambda: self._hash_file(ref))
        sha = self._hashes.get_or_compute(
            (ref.kind, ref.value), lambda: hashlib.sha256(self.source_bytes(ref)).hexdigest()
        )
        if ref.kind == "span":
            self._span_shas[str(ref.value)] = sha
        return sha

    def know_span_hashes(self, known: Mapping[str, str]) -> None:
        """Source hashes of spans of a data file that earlier runs computed (span ref value -> sha256),
        kept with the file's saved index while the file is unchanged (benchmarks/readers/saved_index.py)."""
        for value, sha in known.items():
            self._hashes.put(("span", value), sha)

    def span_hashes(self) -> dict[str, str]:
        """The source hashes of spans this pipeline computed or used (for the data file's saved index)."""
        return dict(self._span_shas)

    def know_hashes(self, known: Mapping[str, tuple[int, int, str]]) -> None:
        """Source hashes this run already has: path -> (mtime_ns, size, sha256), as the data's fingerprint
        read them (engine/location.py, from the cache folder's file hashes). A file whose mtime or size
        differs when a query needs it is hashed again; the rest are not read twice."""
        for path, (mtime_ns, size, sha) in known.items():
            self._hashes.put(("path", path, mtime_ns, size), sha)

    def _hash_file(self, ref: ImageRef) -> str:
        h = hashlib.sha256()
        with self._reading(ref), open_regular(str(ref.value)) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    note: Callable[[str], None] | None = None  # where a note about an image goes (a run's console); else stderr

    @contextmanager
    def _reading(self, ref: ImageRef) -> Iterator[None]:
        """Turn any failure to read or decode into one line naming the image."""
        from PIL import UnidentifiedImageError

        try:
            yield
        except FileNotFoundError as e:
            if ref.kind == "span":
                raise DataError(f"cannot read image {ref.describe()}: the data file is not there") from e
            raise DataError(f"image not found: {ref.value}") from e
        except UnidentifiedImageError as e:
            raise DataError(f"cannot read image {ref.describe()}: not a recognised image format") from e
        except _decode_errors() as e:
            # a named pipe or a symlink loop (core.image_files) is said as such
            reason = (read_problem(e) if isinstance(e, OSError) else None) or " ".join(str(e).split()) \
                or type(e).__name__
            raise DataError(f"cannot read image {ref.describe()}: {reason}") from e

    @contextmanager
    def _lazy(self, ref: ImageRef) -> Iterator[Image.Image]:
        """The image with only its header read; read errors in the body name the image."""
        from PIL import Image

        with self._reading(ref):
            src = open_regular(str(ref.value)) if ref.kind == "path" else io.BytesIO(self.source_bytes(ref))
            bomb.quiet_pillow_warning()  # said as evalkit's own line, naming the image (images/bomb.py)
            with src, Image.open(src) as img:
                bomb.check(img, ref.describe(), self.note)
                yield img

    def header(self, ref: ImageRef) -> ImageHeader:
        """Size (EXIF-oriented), type and byte count from the header alone: what provider limits need."""
        def read() -> ImageHeader:
            with self._lazy(ref) as img:
                w, h = img.size
                if _orientation(img) in (5, 6, 7, 8):
                    w, h = h, w
                mime = MIME.get(img.format or "", f"image/{(img.format or 'unknown').lower()}")
            nbytes = os.stat(str(ref.value)).st_size if ref.kind == "path" else len(self.source_bytes(ref))
            return ImageHeader(w, h, mime, nbytes)

        return self._headers.get_or_compute(self.source_hash(ref), read)

    def open(self, ref: ImageRef, draft_size: tuple[int, int] | None = None) -> Image.Image:
        """Decoded, EXIF-oriented RGB; JPEGs decode at reduced scale when draft_size allows."""
        return self._on_worker(lambda: self._open(ref, draft_size))

    def _open(self, ref: ImageRef, draft_size: tuple[int, int] | None) -> Image.Image:
        with self._lazy(ref) as img:
            out, _, _ = _decode(img, lambda _full: draft_size)
        self._count(decodes=1, decoded_pixels=out.width * out.height)
        return out

    # -- prepare

    def prepare(self, part: ImagePart) -> PreparedImage:
        """The bytes to send for one image part, memoised by (source hash, transform)."""
        key = (self.source_hash(part.ref), part.transform)
        return self._prepared.get_or_compute(
            key, lambda: self._on_worker(lambda: self._prepare(part, key[0]))
        )

    def _prepare(self, part: ImagePart, sha: str) -> PreparedImage:
        from evalkit.core.fingerprint import fingerprint_image

        t, ref = part.transform, part.ref
        fmt = _norm_fmt(t.fmt)
        if not 1 <= t.quality <= 100:
            raise EvalkitError(f"JPEG quality must be 1..100, got {t.quality}")
        with self._lazy(ref) as img:
            alpha = img.mode in _ALPHA_MODES or "transparency" in img.info
            plain = img.format in MIME and not alpha and img.mode != "CMYK" and _orientation(img) == 1
            if t.is_identity() and plain:
                self._count(passthrough=1)
                return PreparedImage(self.source_bytes(ref), MIME[img.format], img.width, img.height)
            out, pixels = decode_region(img, ref.describe(), t, None)
        self._count(decodes=1, decoded_pixels=pixels)
        if min(out.size) >= 64:  # a free fingerprint: 16x16 thumbnails barely notice the resize
            self._fps.put((sha, t.rotate, t.crop), fingerprint_image(out))
        fmt = fmt or ("PNG" if alpha else "JPEG")
        return PreparedImage(encode(out, fmt, t.quality), MIME[fmt], out.width, out.height)

    def ready(self, part: ImagePart) -> bool:
        """True when hash, prepared bytes and fingerprint are all memo hits (no read, no decode),
        so a caller on the event loop may skip a thread hop. No system call: a path was stat-ed when first seen."""
        if part.ref.kind == "path":
            key = self._file_keys.get(str(part.ref.value))
            if key is None:
                return False
            sha = self._hashes.peek(key)
        else:
            sha = self._hashes.peek((part.ref.kind, part.ref.value))
        t = part.transform
        return sha is not None and (sha, t) in self._prepared and (sha, t.rotate, t.crop) in self._fps

    # -- fingerprints

    def fingerprint(self, part: ImagePart) -> str:
        """Fingerprint of the image after rotate and crop (resize/encode barely change it)."""
        t = part.transform
        sha = self.source_hash(part.ref)
        key = (sha, t.rotate, t.crop)
        return self._fps.get_or_compute(key, lambda: self._on_worker(lambda: self._fingerprint(part)))

    def _fingerprint(self, part: ImagePart) -> str:
        from evalkit.core.fingerprint import fingerprint_image

        def shrink(p: Plan) -> Plan:  # only ~128 px of the region are needed for a 16x16 thumbnail
            bw, bh = p.box[2] - p.box[0], p.box[3] - p.box[1]
            s = min(1.0, max(_FP_SIDE / bw, _FP_SIDE / bh))
            return replace(p, target=(math.ceil(bw * s), math.ceil(bh * s)))

        t = Transform(rotate=part.transform.rotate, crop=part.transform.crop)
        with self._lazy(part.ref) as img:
            out, _ = decode_region(img, part.ref.describe(), t, shrink)
        self._count(fp_decodes=1)
        return fingerprint_image(out)

    def _count(self, **deltas: int) -> None:
        with self._stats_lock:
            for name, d in deltas.items():
                setattr(self.stats, name, getattr(self.stats, name) + d)
