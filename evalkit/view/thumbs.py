"""Thumbnails of the images as they were sent: made once per image content and transform, kept in the site.

"As sent" is the query's own transform (rotation, crop, the run's size limits) tightened to the
provider's documented limits, exactly as the runner fits it (images.provider_limits.fit_transform);
the thumbnail is that image scaled down further in the same pass (a smaller max_side: the same
aspect and region, decoded at reduced scale where JPEG allows). A thumbnail's name is a hash of the
image's content hash, the provider's limits and the transform, so a second build finds it on disk.
Content hashes of image files are remembered by (path, size, mtime, inode, ctime) in thumbs/index.json: a
rebuild over unchanged data stats each image once and reads none. Those paths are kept relative to
the site (`evalkit view --serve` serves the file, and an absolute path names the user's home); an
index written with absolute paths by an earlier build is read as well.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalkit.core.errors import EvalkitError
from evalkit.core.files import write_json_atomic
from evalkit.core.types import ImagePart, ImageRef, Transform
from evalkit.images.ops import fit_size
from evalkit.images.pipeline import ImagePipeline
from evalkit.images.provider_limits import LIMITS_VERSION, fit_transform
from evalkit.providers.registry import limits_for
from evalkit.rundir.identity import FileHashes

THUMB_SIDE = 384  # px, the long side of a thumbnail (crisp at the page's 320 px on most screens)
THUMB_QUALITY = 80
FOLDER = "thumbs"
INDEX = "index.json"
INDEX_VERSION = 1


@dataclass(frozen=True)
class Thumb:
    """What the page shows for one image: the thumbnail, or why there is none, and the full image's link."""

    src: str | None  # path inside the site
    width: int = 0
    height: int = 0
    full: str | None = None  # the source image, relative to the site (None: embedded in the data file)
    missing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"t": self.src, "w": self.width, "h": self.height, "f": self.full}
        if self.missing:
            d["x"] = self.missing
        return d


@dataclass
class ThumbStats:
    made: int = 0  # thumbnails written by this build
    reused: int = 0  # found in the site from an earlier build
    failed: int = 0  # images that could not be read (shown as a placeholder)
    hashed: int = 0  # image files read to learn their content hash


@dataclass(frozen=True)
class _Job:
    ref: ImageRef
    transform: Transform
    provider: str
    name: str


class ThumbStore:
    """Ask for thumbnails with `want`, make the missing ones with `make`, read them with `get`, then `save`."""

    def __init__(self, site: Path, pipeline: ImagePipeline):
        self.site = Path(site)
        self.folder = self.site / FOLDER
        self.pipeline = pipeline
        self.stats = ThumbStats()
        index = _read_index(self.folder / INDEX)
        self._root = os.path.abspath(self.site)  # index.json's paths are relative to it
        known = index.get("files")
        memo = {os.path.normpath(os.path.join(self._root, p)): v
                for p, v in (known.items() if isinstance(known, dict) else ())}
        self._hashes = FileHashes(memo=memo)  # absolute path -> [size, mtime_ns, sha256, inode, ctime_ns]
        self._made: dict[str, list[int]] = index.get("thumbs", {})  # name -> [width, height]
        self._jobs: dict[str, _Job] = {}
        self._wanted: dict[tuple[Any, ...], str] = {}  # (ref, transform, provider) -> name, or "!" + why
        self._errors: dict[str, str] = {}
        self._dicts: dict[tuple[str, Any], dict[str, Any]] = {}

    # ---- asking -------------------------------------------------------------------------
    def want(self, ref: ImageRef, transform: Transform, provider: str) -> str:
        """A handle for the thumbnail of `ref` as sent to `provider` under `transform`."""
        key = (ref.kind, ref.value, transform, provider)
        handle = self._wanted.get(key)
        if handle is None:
            handle = self._wanted[key] = self._handle(ref, transform, provider)
        return handle

    def _handle(self, ref: ImageRef, transform: Transform, provider: str) -> str:
        try:
            sha = self._sha(ref)
        except EvalkitError as e:
            return "!" + str(e)
        name = hashlib.sha256(f"{sha}|{provider}|{LIMITS_VERSION}|{transform!r}".encode()).hexdigest()[:24]
        if name not in self._jobs:
            self._jobs[name] = _Job(ref, transform, provider, name)
        return name

    def _sha(self, ref: ImageRef) -> str:
        """The image's content hash: remembered per (path, size, mtime, inode, ctime) across builds, else computed."""
        if ref.kind != "path":
            return self.pipeline.source_hash(ref)
        try:
            sha = self._hashes.sha256(os.path.abspath(str(ref.value)))
        except FileNotFoundError:
            raise EvalkitError(f"image not found: {ref.value}") from None
        except OSError as e:
            raise EvalkitError(f"image cannot be read: {ref.value} ({e.strerror or e})") from None
        self.stats.hashed = self._hashes.reads
        return sha

    # ---- making -------------------------------------------------------------------------
    def make(self, workers: int = 2) -> None:
        """Write every wanted thumbnail not already in the site (in `workers` threads)."""
        todo = []
        for name, job in self._jobs.items():
            if name in self._made and self._path(name).exists():
                self.stats.reused += 1
            else:
                todo.append(job)
        if not todo:
            return
        with ThreadPoolExecutor(max(1, workers), thread_name_prefix="evalkit-thumb") as pool:
            for job, result in zip(todo, pool.map(self._make_one, todo), strict=True):
                if isinstance(result, str):
                    self._errors[job.name] = result
                    self.stats.failed += 1
                else:
                    self._made[job.name] = list(result)
                    self.stats.made += 1

    def _make_one(self, job: _Job) -> tuple[int, int] | str:
        try:
            t = self._as_sent(job)
            side = THUMB_SIDE if t.max_side is None else min(THUMB_SIDE, t.max_side)
            if t.size is not None:
                small = replace(t, size=fit_size(*t.size, THUMB_SIDE), fmt="JPEG", quality=THUMB_QUALITY)
            else:
                small = replace(t, max_side=side, fmt="JPEG", quality=THUMB_QUALITY)
            prepared = self.pipeline.prepare(ImagePart(job.ref, small))
        except EvalkitError as e:
            return str(e)
        path = self._path(job.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(prepared.data)
        os.replace(tmp, path)
        return prepared.width, prepared.height

    def _as_sent(self, job: _Job) -> Transform:
        """The transform the runner sends the image with for this provider (see the module docstring)."""
        limits = limits_for(job.provider)
        if limits is None or not (limits.max_side or limits.max_pixels or limits.max_bytes):
            return job.transform
        h = self.pipeline.header(job.ref)
        return fit_transform(limits, job.transform, h.width, h.height, mime=h.mime, nbytes=h.nbytes)

    def _path(self, name: str) -> Path:
        return self.folder / name[:2] / f"{name}.jpg"

    # ---- reading ------------------------------------------------------------------------
    def get_dict(self, handle: str, ref: ImageRef) -> dict[str, Any]:
        """get(...).to_dict(), one shared dict per image and handle (a question's variants and runs repeat them)."""
        key = (handle, ref.value if ref.kind == "path" else None)
        out = self._dicts.get(key)
        if out is None:
            out = self._dicts[key] = self.get(handle, ref).to_dict()
        return out

    def get(self, handle: str, ref: ImageRef) -> Thumb:
        full = self.link(ref)
        if handle.startswith("!"):
            return Thumb(None, full=full, missing=handle[1:])
        if handle in self._errors:
            return Thumb(None, full=full, missing=self._errors[handle])
        size = self._made.get(handle)
        if size is None:
            return Thumb(None, full=full, missing="thumbnail not made")
        return Thumb(f"{FOLDER}/{handle[:2]}/{handle}.jpg", size[0], size[1], full)

    def link(self, ref: ImageRef) -> str | None:
        """The source image relative to the site, URL-quoted (None: the image is inside the data file)."""
        if ref.kind != "path":
            return None
        try:
            rel = os.path.relpath(str(ref.value), self.site)
        except ValueError:  # another drive: an absolute file URL
            return Path(str(ref.value)).resolve().as_uri()
        return quote(rel.replace(os.sep, "/"))

    # ---- keeping ------------------------------------------------------------------------
    def save(self) -> None:
        """Write the index; drop thumbnails and hashes this build did not use (the site holds one build)."""
        keep = {n for n in self._jobs if n in self._made}
        for name in set(self._made) - keep:
            self._path(name).unlink(missing_ok=True)
        self._made = {n: self._made[n] for n in sorted(keep)}
        files = {rel: v for p, v in self._hashes.memo_of(sorted(self._hashes.known)).items()
                 if (rel := _relative(p, self._root)) is not None}
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.folder / INDEX, {"version": INDEX_VERSION, "files": files, "thumbs": self._made})
        for sub in self.folder.iterdir():
            if sub.is_dir() and not any(sub.iterdir()):
                sub.rmdir()


def _relative(path: str, root: str) -> str | None:
    """`path` relative to `root` with forward slashes; None on another drive (it is not remembered)."""
    try:
        return os.path.relpath(path, root).replace(os.sep, "/")
    except ValueError:
        return None


def _read_index(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION:
        return {}
    return data
