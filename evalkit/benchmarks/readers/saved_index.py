"""A saved index of a big data file, so the next run does not read it again: every record's text
fields, its byte span and its image's span, and the file's sha256, as the streaming readers
(stream_tsv.py, stream_json.py) found them reading the file forward once.

The index is written while that one forward read happens (the file is hashed as it is read, so the
first run reads it once where it read it twice), and only when the read went to the end of the file
with the file unchanged under it. The next run that reads the same file gets the very rows and
records from the index (the same Items, spans, request keys, data fingerprint and run directory)
after one stat of the file; the images stay in the file and only those of the queries asked are
ever read (`--shard`, `--limit`, a run stopped early read only their items' bytes). Beside each index,
NAME.images.json keeps the sha256 of the images that runs hashed for their request keys
(`keep_image_hashes`), so a run whose answers are known (a resume, the cache) reads none of them.

An index stands while the file's size, mtime, inode and change time are those it was made from,
and, for a registered source, while the sha256 its listing records is the index's. Anything else
(another file, a damaged or partial index, another format version) is ignored and the file read
again; a file that changed, or an index found damaged, is said in one line (`Indexing.notes`).

Where the indexes go is the caller's (`Indexing`, set around a load with `indexing()` as read caps
are): the cache folder's `data-index/` for a local `--data PATH`, `evalkit-index/` in the repository's
folder of the Hub cache for a registered source. Without one, the readers read as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.core.types import ImageRef

INDEX_VERSION = 1
LOCAL_FOLDER = "data-index"  # in the cache folder, beside file-hashes.json
SUFFIX = ".idx"
ENV_SWITCH = "EVALKIT_DATA_INDEX"  # "0" / "off": no index read or written


@dataclass
class Indexing:
    """Where one load keeps the indexes of the files it reads, and what it learned doing so.

    `folder`: for files of no registered source (None: no index for them, unless `also` names
    folders to look in); `recorded`: a registered
    source's files (absolute path) -> (the sha256 its source records, the folder
    beside the Hub cache). `write`: False for a run that writes nothing (--dry-run): indexes are read,
    never made. `hashes`: the sha256 of every file read or found indexed, as the cache folder's file-hash
    memo keeps them (path -> [size, mtime_ns, sha256, inode, ctime_ns]), so the fingerprint never reads
    a file again."""

    folder: Path | None
    recorded: Mapping[str, tuple[str, Path]] = field(default_factory=dict)
    write: bool = True
    notes: list[str] = field(default_factory=list)
    hashes: dict[str, list[Any]] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)  # files read from their index (not scanned)
    built: list[str] = field(default_factory=list)  # files scanned and indexed
    # the sha256 of images in the indexed files (span ref value -> sha256 of its bytes), as earlier runs
    # computed them for their request keys: a resume checks its answers without reading their images
    image_hashes: dict[str, str] = field(default_factory=dict)
    places: dict[str, tuple[Path, list[int], str]] = field(default_factory=dict)  # file -> (index, stamp, sha256)
    # more folders an index of a local file may be found in (read there, written in `folder`): the cache
    # folders a run directory's run may have used, for `evalkit report` and `evalkit view`
    also: tuple[Path, ...] = ()

    def place(self, path: Path, kind: str, image: str) -> tuple[Path, str | None] | None:
        """(the index file for this file read this way, the sha256 recorded for it) or None: no place."""
        hit = self.recorded.get(os.path.abspath(path))
        if hit is not None:
            sha, folder = hit
            return folder / _name(kind, image, f"sha256:{sha}"), sha
        folders = [f for f in (self.folder, *self.also) if f is not None]
        if not folders:
            return None
        name = _name(kind, image, f"path:{os.path.abspath(path)}")
        return next((f / name for f in folders if (f / name).is_file()), folders[0] / name), None


def indexing_of(env: Mapping[str, str], folder: Path | None, recorded: Mapping[str, tuple[str, Path]],
                write: bool = True, also: tuple[Path, ...] = ()) -> Indexing | None:
    """The Indexing of one load (its fields above); None where EVALKIT_DATA_INDEX turns indexes off."""
    if (env.get(ENV_SWITCH) or "").strip().lower() in ("0", "off", "no", "false"):
        return None
    return Indexing(folder, recorded, write, also=also)


def _name(kind: str, image: str, key: str) -> str:
    return hashlib.sha256(f"{INDEX_VERSION}\0{kind}\0{image}\0{key}".encode()).hexdigest()[:40] + SUFFIX


_CURRENT: ContextVar[Indexing | None] = ContextVar("evalkit_data_index", default=None)


@contextlib.contextmanager
def indexing(ix: Indexing | None) -> Iterator[Indexing | None]:
    """The index place for the reads in this block (None: no index)."""
    token = _CURRENT.set(ix)
    try:
        yield ix
    finally:
        _CURRENT.reset(token)


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _damaged(ix: Indexing, path: Path) -> None:
    ix.notes.append(f"the saved index of {path} was damaged: ignored, {path} read again and indexed anew")


def open_saved(path: Path, kind: str, image: str) -> tuple[dict[str, Any] | None, Builder | None]:
    """(the saved body of `path`'s index, None) when one stands; else (None, a Builder for the read
    about to happen, or None when no index is kept)."""
    ix = _CURRENT.get()
    if ix is None:
        return None, None
    place = ix.place(path, kind, image)
    if place is None:
        return None, None
    where, recorded = place
    try:
        st = os.stat(path)
    except OSError:
        return None, None  # the reader says why it cannot read the file
    stamp = _stamp(st)
    body = _load(ix, where, path, kind, image, stamp, recorded)
    if body is not None:
        ix.used.append(str(path))
        ix.hashes[str(path)] = [st.st_size, st.st_mtime_ns, body["sha256"], st.st_ino, st.st_ctime_ns]
        ix.places[str(path)] = (where, stamp, body["sha256"])
        for span, sha in _image_hashes(where, stamp, body["sha256"]).items():
            ix.image_hashes[f"{path}\0{span.replace(':', chr(0))}"] = sha
        return body, None
    return None, Builder(ix, where, path, kind, image, recorded)


def _load(ix: Indexing, where: Path, path: Path, kind: str, image: str, stamp: list[int],
          recorded: str | None) -> dict[str, Any] | None:
    """The index's body when it stands for this file as it is now; a note when the file changed since
    it was made or the index is damaged."""
    try:
        with open(where, "rb") as fh:
            head_line = fh.readline()
            body_text = fh.read()
    except FileNotFoundError:
        return None
    except OSError:
        _damaged(ix, path)
        return None
    try:
        head = json.loads(head_line)
        if not isinstance(head, dict) or head.get("evalkit_data_index") != INDEX_VERSION:
            raise ValueError("not an index of this version")
        if head.get("kind") != kind or head.get("image") != image:
            raise ValueError("another reader's")
        if hashlib.sha256(body_text).hexdigest() != head.get("body_sha256"):
            raise ValueError("body does not match its checksum")
    except ValueError:
        _damaged(ix, path)
        return None
    if recorded is None and head.get("path") != os.path.abspath(path):
        _damaged(ix, path)  # (the name is the path's hash: another file's index under it is no index)
        return None
    if head.get("stamp") != stamp or (recorded is not None and head.get("sha256") != recorded):
        what = "its sha256" if head.get("stamp") == stamp else "its size, time or inode"
        ix.notes.append(f"{path} changed since it was indexed ({what}): read again and indexed anew")
        return None
    try:
        body = json.loads(body_text)
        if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
            raise ValueError("no rows")
    except ValueError:
        _damaged(ix, path)
        return None
    body["sha256"] = str(head.get("sha256"))
    return body


class Builder:
    """What one forward read of a file collects for its index: the file's bytes go through `tee`
    (hashed as they are read), each row or record through `add`; `finish` writes the index once the
    read reached the end of the file and the file did not change meanwhile."""

    def __init__(self, ix: Indexing, where: Path, path: Path, kind: str, image: str,
                 recorded: str | None = None) -> None:
        self.ix, self.where, self.path, self.kind, self.image = ix, where, path, kind, image
        self.recorded = recorded
        self.rows: list[list[Any]] = []
        self.extra: dict[str, Any] = {}
        self._sha = hashlib.sha256()
        self._stamp: list[int] | None = None
        self._tee: _Tee | None = None

    def tee(self, fh: BinaryIO) -> _Tee:
        """`fh`, its reads hashed; its stat now is the one the index is made from."""
        self._stamp = _stamp(os.fstat(fh.fileno()))
        self._tee = _Tee(fh, self._sha)
        return self._tee

    def add(self, row: list[Any]) -> None:
        self.rows.append(row)

    def finish(self) -> None:
        """Write the index atomically (best effort: a read-only place costs only the next read)."""
        if self._tee is not None:
            self._tee.close()
        try:
            now = _stamp(os.stat(self.path))
        except OSError:
            return
        if now != self._stamp:
            return  # changed while it was read: the next run reads it again
        sha = self._sha.hexdigest()
        self.ix.hashes[str(self.path)] = [now[0], now[1], sha, now[2], now[3]]
        self.ix.built.append(str(self.path))
        if self.recorded is not None and sha != self.recorded:  # never an index standing for other bytes
            self.ix.notes.append(f"{self.path}: its sha256 {sha} is not the {self.recorded} its source records; "
                                 f"not indexed (`evalkit data verify` checks the cached files)")
            return
        if not self.ix.write:
            return
        self.ix.places[str(self.path)] = (self.where, now, sha)
        body = json.dumps({**self.extra, "rows": self.rows}, separators=(",", ":")).encode()
        head = {"evalkit_data_index": INDEX_VERSION, "kind": self.kind, "image": self.image,
                "path": os.path.abspath(self.path), "stamp": now, "sha256": sha, "rows_n": len(self.rows),
                "body_sha256": hashlib.sha256(body).hexdigest()}
        with contextlib.suppress(OSError):
            self.where.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.where.with_name(f"{self.where.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as out:
                out.write(json.dumps(head, separators=(",", ":")).encode() + b"\n" + body)
            os.replace(tmp, self.where)


class _Tee:
    """A binary file whose reads also feed a hash, on a thread of its own (hashlib lets go of the GIL):
    the file is hashed while the reader parses it, one chunk behind at most."""

    def __init__(self, fh: BinaryIO, sha: Any) -> None:
        self.fh, self.sha = fh, sha
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="evalkit-index-hash")
        self._pending: Future[None] | None = None

    def read(self, n: int = -1) -> bytes:
        chunk = self.fh.read(n)
        self.wait()
        self._pending = self._pool.submit(self.sha.update, chunk)
        return chunk

    def wait(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def close(self) -> None:
        self.wait()
        self._pool.shutdown(wait=False)


def index_files(folder: Path) -> list[Path]:
    """The saved indexes in a folder, with their image hashes (what `rm` may remove: each is rebuilt)."""
    return sorted([*folder.glob(f"*{SUFFIX}"), *folder.glob(f"*{IMAGES}")]) if folder.is_dir() else []


# ---- the images' sha256, kept beside an index -------------------------------------------------

IMAGES = ".images.json"  # beside NAME.idx: "start:end" -> sha256 of the image's bytes, for one stamp of the file


def _images_path(where: Path) -> Path:
    return where.with_name(where.name[: -len(SUFFIX)] + IMAGES)


def _image_hashes(where: Path, stamp: list[int], sha: str) -> dict[str, str]:
    """The image hashes kept for this very file (its stamp and sha256); {} when none or another's."""
    try:
        saved = json.loads(_images_path(where).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(saved, dict) or saved.get("stamp") != stamp or saved.get("sha256") != sha:
        return {}
    spans = saved.get("spans")
    return {str(k): str(v) for k, v in spans.items()} if isinstance(spans, dict) else {}


def keep_image_hashes(ix: Indexing, computed: Mapping[str, str]) -> None:
    """Add the images' sha256 a run computed (span ref value -> sha256) to their files' indexes (best
    effort, atomically): the next run of the same data finds its answers without reading their images."""
    if not ix.write:
        return
    by_file: dict[str, dict[str, str]] = {}
    for value, sha in computed.items():
        path, start, end = ImageRef("span", value).span()
        by_file.setdefault(path, {})[f"{start}:{end}"] = sha
    for path, spans in by_file.items():
        place = ix.places.get(path)
        if place is None:
            continue
        where, stamp, file_sha = place
        kept = _image_hashes(where, stamp, file_sha)
        if spans.items() <= kept.items():
            continue  # nothing new (a resume, a cached run): the file stays as it is
        merged = {**kept, **spans}
        target = _images_path(where)
        with contextlib.suppress(OSError):
            tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"stamp": stamp, "sha256": file_sha, "spans": merged}, separators=(",", ":")),
                           encoding="utf-8")
            os.replace(tmp, target)
