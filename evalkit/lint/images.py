"""Image checks: files that are not there or empty, sizes far from the rest (cheap, no decoding);
pictures that do not decode or end early, the same picture under other ids, near-duplicates (full).

Every distinct image (a file path, or inline bytes) is checked once and named with every item
that shows it. PIL and numpy are imported inside the functions that decode.
"""

from __future__ import annotations

import binascii
import hashlib
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evalkit.core import read_caps
from evalkit.core.findings import Finding
from evalkit.core.inline import inline_bytes, inline_size
from evalkit.core.types import ImageRef, Item
from evalkit.images.files import not_a_file, open_regular
from evalkit.lint.items import image_key, item_place
from evalkit.lint.model import finding

MIN_FOR_PERCENTILES = 100  # below this the 1st/99th percentiles only ever pick out the smallest and largest
NEAR_DUPLICATE = 2.0  # mean grey-level difference (0..255) of two 16x16 fingerprints that look the same
_LISTED = 8  # item ids named in a message before "and N more"


@dataclass
class ImageUse:
    """One distinct image and the items that show it."""

    ref: ImageRef
    items: list[str] = field(default_factory=list)
    file: str | None = None  # where the reference is (a TSV row for inline images)
    where: str | None = None
    digest: str | None = None  # sha256 of an inline image's bytes, once decode_findings has read them

    def label(self) -> str:
        return str(self.ref.value) if self.ref.kind == "path" else f"the inline image of {self.items[0]}"

    def subject(self) -> str:
        """How a message names the image whose finding already names its file (or row)."""
        return "the image" if self.ref.kind == "path" else "the inline image"

    def at(self) -> dict[str, object]:
        """Finding location: the image file itself, or the data row holding the inline image."""
        if self.ref.kind == "path":
            return {"file": str(self.ref.value), "items": tuple(self.items), "where": None}
        return {"file": self.file, "items": tuple(self.items), "where": self.where}


def collect(items: Iterable[Item]) -> dict[tuple, ImageUse]:
    """Distinct images (by `image_key`) with the ids of the items that show them, in item order.

    Linear in the number of (item, image) pairs: whether an item is already listed under an image is
    a set lookup, so 100,000 questions on one picture cost what 100,000 pictures do."""
    uses: dict[tuple, ImageUse] = {}
    listed: set[tuple[tuple, str]] = set()  # (image key, item id) already in use.items
    for it in items:
        file, where = item_place(it)
        refs = []
        variants = it.meta.get("variants")
        if isinstance(variants, dict) and len(variants) > 1:  # TDBench official: every rotation file's picture
            for deg, v in sorted(variants.items()):
                vfile, vwhere = (str(v["where"]).partition(": ")[::2] if isinstance(v.get("where"), str)
                                 else (None, f"index {it.id}, {deg}° rotation file"))
                refs += [(r, vfile, vwhere) for r in (v.get("images") or ())]
        refs += [(r, file, where) for r in it.images]  # (the first rotation's, already there for TDBench)
        for ref, rfile, rwhere in refs:
            key = image_key(ref)
            use = uses.get(key)
            if use is None:
                use = uses[key] = ImageUse(ref, [], rfile, rwhere)
            if (key, it.id) not in listed:
                listed.add((key, it.id))
                use.items.append(it.id)
    return uses


def source_bytes(ref: ImageRef) -> bytes:
    """The stored bytes of an image, as a run reads them (a "data:" prefix on base64 is allowed; a
    span of a data file is read now)."""
    if ref.kind == "path":
        with open_regular(str(ref.value)) as fh:
            return fh.read()
    return inline_bytes(ref)


def stored_size(ref: ImageRef) -> int | None:
    """Bytes of the stored image without reading it (None: the file is not there)."""
    if ref.kind == "path":
        try:
            return os.stat(str(ref.value)).st_size
        except OSError:
            return None
    return inline_size(ref)


def file_findings(uses: dict[tuple, ImageUse]) -> tuple[list[Finding], dict[tuple, int]]:
    """(missing, zero-byte and too big images, the byte size of every other image): no decoding."""
    out, sizes = [], {}
    cap = read_caps.caps().image_bytes
    for key, use in uses.items():
        problem = not_a_file(str(use.ref.value)) if use.ref.kind == "path" else None
        size = stored_size(use.ref) if problem is None else None
        if problem is not None:  # missing, a named pipe, a folder, a symlink loop: said as such
            out.append(finding("error", "image-missing", problem, **use.at()))
        elif size is None:
            out.append(finding("error", "image-missing", "image file not found", **use.at()))
        elif size == 0:
            out.append(finding("error", "image-empty", f"{use.subject()} is zero bytes", **use.at()))
        elif size > cap:  # never read: neither here nor by a run (core.read_caps)
            out.append(finding("error", "image-too-big", f"{use.subject()} is {read_caps.size_text(size)}, "
                                                         f"{read_caps.over_image_cap(cap)}", **use.at()))
        else:
            sizes[key] = size
    return out, sizes


def _kb(n: float) -> str:
    return f"{n:,.0f} bytes" if n < 10_240 else f"{n / 1024:,.1f} KB"


def size_outliers(uses: dict[tuple, ImageUse], sizes: dict[tuple, int]) -> list[Finding]:
    """Images below the set's 1st or above its 99th percentile of file size (info, one per image)."""
    if len(sizes) < MIN_FOR_PERCENTILES:
        return []
    ordered = sorted(sizes.values())
    low, high = _percentile(ordered, 1), _percentile(ordered, 99)
    out = []
    for key, size in sizes.items():
        if size < low or size > high:
            side = f"below the 1st percentile ({_kb(low)})" if size < low else f"above the 99th ({_kb(high)})"
            use = uses[key]
            out.append(finding("info", "image-size-outlier", f"{use.subject()} is {_kb(size)}, {side} of the "
                                                              f"set's {len(sizes)} images", **use.at()))
    return out


def _percentile(ordered: Sequence[int], q: float) -> float:
    """Linear-interpolated percentile of sorted values (numpy's default method)."""
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def decode_findings(uses: dict[tuple, ImageUse], sizes: dict[tuple, int]) -> tuple[list[Finding], dict[tuple, str]]:
    """(images that do not decode or end early, a 16x16 fingerprint of every one that decodes).

    JPEGs are decoded at a reduced scale (`draft`), which still reads every byte of the stream, so a
    truncated file is found at a fraction of the cost of a full decode."""
    from PIL import Image, ImageOps

    from evalkit.core.fingerprint import SIDE, fingerprint_image

    out, prints = [], {}
    for key in sizes:
        use = uses[key]
        try:
            data = source_bytes(use.ref)
        except (binascii.Error, ValueError) as exc:
            out.append(finding("error", "image-unreadable", f"{use.subject()} is not valid base64 ({exc})",
                               **use.at()))
            continue
        except OSError as exc:
            out.append(finding("error", "image-unreadable", f"{use.subject()} cannot be read ({exc})", **use.at()))
            continue
        if use.ref.kind != "path":
            use.digest = hashlib.sha256(data).hexdigest()
        try:
            with Image.open(io.BytesIO(data)) as img:
                img.draft("RGB", (SIDE * 8, SIDE * 8))
                img.load()
                prints[key] = fingerprint_image(ImageOps.exif_transpose(img))
        except Exception as exc:  # noqa: BLE001 - whatever PIL raises, the picture does not decode
            text = "not a known image format" if "cannot identify image" in str(exc) else str(exc)
            kind = "image-truncated" if "truncat" in text.lower() else "image-unreadable"
            what = "ends early" if kind == "image-truncated" else "does not decode as a picture"
            out.append(finding("error", kind, f"{use.subject()} {what} ({type(exc).__name__}: {text[:120]})",
                               **use.at()))
    return out, prints


def near_duplicates(uses: dict[tuple, ImageUse], prints: dict[tuple, str]) -> list[Finding]:
    """Distinct images of different items whose fingerprints differ by at most NEAR_DUPLICATE (info,
    one per pair). Inline copies of one picture, byte for byte (a base64 record per question), are
    the same image, not near-duplicates.

    Mean absolute difference is at least the difference of the two means, so images are sorted
    by mean brightness and each is compared only with those within the threshold of it."""
    import numpy as np

    keys = list(prints)
    if len(keys) < 2:
        return []
    grid = np.array([np.frombuffer(bytes.fromhex(prints[k]), dtype=np.uint8) for k in keys], dtype=np.int16)
    means = grid.mean(axis=1)
    order = np.argsort(means, kind="stable")
    grid, means = grid[order], means[order]
    out = []
    for i in range(len(keys) - 1):
        end = int(np.searchsorted(means, means[i] + NEAR_DUPLICATE, side="right"))
        if end <= i + 1:
            continue
        dist = np.abs(grid[i + 1:end] - grid[i]).mean(axis=1)
        for j in np.nonzero(dist <= NEAR_DUPLICATE)[0]:
            a, b = uses[keys[order[i]]], uses[keys[order[i + 1 + j]]]
            if set(a.items) & set(b.items):
                continue  # one item's own pictures (its rotations, an RGB-thermal pair): not a duplicate
            if a.digest is not None and a.digest == b.digest:
                continue  # one picture stored inline once per question (MME-RealWorld's base64 parts)
            out.append(finding("info", "image-near-duplicate",
                               f"{a.label()} and {b.label()} look the same (fingerprint difference "
                               f"{float(dist[j]):.1f} of 255)", file=a.at()["file"],  # type: ignore[arg-type]
                               items=tuple(dict.fromkeys(a.items + b.items)), where=a.where))
    return out


def shared_images(uses: dict[tuple, ImageUse], items: Sequence[Item]) -> list[Finding]:
    """The same image under different item ids where the format does not expect it (info): the
    generic TSV form shares a picture by naming another row's index, so identical inline images in
    rows that do not refer to each other are worth a look; TDBench gives every problem its own."""
    referring = {it.id for it in items if it.meta.get("lint_image_from")}
    out = []
    for use in uses.values():
        own = [i for i in use.items if i not in referring]
        if len(own) > 1:
            listed = ", ".join(own[:_LISTED]) + (f" and {len(own) - _LISTED} more" if len(own) > _LISTED else "")
            out.append(finding("info", "image-shared", f"{use.subject()} is shown by {len(own)} items that do not "
                                                       f"refer to each other: {listed}", **use.at()))
    return out
