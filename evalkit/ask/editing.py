"""Image editing ("image + instruction -> image"), e.g. IF-Bench GenViP's infrared-to-RGB translation.

Edits are the most expensive requests evalkit makes, so they get the same care as chat
queries: one retry policy and limiter, a content-keyed JSON cache, and a resumable output
folder (`<id>.png` plus a line in `edits.jsonl` as soon as each edit arrives). Editors are
thin, like chat providers: they send one edit and classify failures as ProviderError kinds.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.request_key import request_key
from evalkit.ask.retry import RetryPolicy, with_retries
from evalkit.ask.store.cache import CacheLike
from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.sdk import load_target
from evalkit.core.text.data_json import jsonl_lines
from evalkit.core.types import GenParams, ImagePart, ImageRef, Message, Transform, Usage
from evalkit.images.pipeline import ImagePipeline, PreparedImage
from evalkit.providers import api_key_for, parse_spec
from evalkit.providers.base import ProviderSpec
from evalkit.providers.preflight import check_setup
from evalkit.providers.registry import RECORDS as PROVIDER_RECORDS
from evalkit.providers.registry import find

T = TypeVar("T")

GENVIP_INSTRUCTION = "Translate the infrared image into the corresponding visible light (RGB) image."
RECORDS = "edits.jsonl"
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_TASK = "__evalkit_task__"  # in the key's params, so an edit never shares a key with a chat query


@dataclass(frozen=True)
class EditRequest:
    """One edit: the image, the instruction, and output-affecting parameters (size, quality...)."""

    id: str
    image: ImageRef
    instruction: str
    params: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass
class EditResult:
    """The outcome of one edit; error is an ErrorKind (None on success), like Response.error.

    source: "network" (paid for now), "cache" (response cache) or "output" (file of an earlier run).
    """

    id: str
    image_bytes: bytes | None
    mime: str | None
    error: str | None
    cached: bool
    usage: dict[str, int] = field(default_factory=dict)
    error_message: str | None = None
    path: str | None = None
    request_key: str = ""
    source: Literal["network", "cache", "output"] = "network"
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


class ImageEditor(Protocol):
    spec: ProviderSpec

    async def edit(self, image: PreparedImage, instruction: str,
                   params: Mapping[str, Any] | None = None) -> tuple[bytes, str, Usage]:
        """Send one edit -> (image bytes, mime, usage); raise ProviderError with a kind."""
        ...

    async def close(self) -> None: ...


def sniff_mime(data: bytes) -> str | None:
    """The image type from magic bytes: trusted over what a reply claims about itself."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] in (b"GIF8",):
        return "image/gif"
    return None


def create_editor(spec_text: str, base_urls: Sequence[str] = (), env: Mapping[str, str] | None = None,
                  *, timeout_s: float = 300.0) -> ImageEditor:
    """`openai/gpt-image-1` or `google/gemini-2.5-flash-image` -> an editor (keys from env, never stored)."""
    env = os.environ if env is None else env
    provider, sep, model = (spec_text or "").partition("/")
    if not sep or not model or model.strip() != model:
        raise EvalkitError(f"malformed editor model '{spec_text}': expected openai/<model> or google/<model>")
    record = find(provider)
    if record is None or record.editor is None:
        editors = " or ".join(f"{r.name}/<model>" for r in PROVIDER_RECORDS.values() if r.editor)
        raise EvalkitError(f"provider '{provider}' cannot edit images (use {editors})")
    spec = parse_spec(spec_text, base_urls, env)
    check_setup(spec)
    key = api_key_for(spec, env, flag="editor") or ""
    return load_target(record.editor)(spec, api_key=key, timeout_s=timeout_s)  # type: ignore[return-value]


# ---------------------------------------------------------------- the output folder


def file_stem(edit_id: str) -> str:
    """A safe file name for an id; ids that had to be changed get a hash so two cannot collide."""
    safe = _SAFE.sub("_", edit_id)[:150]
    if safe == edit_id and safe not in ("", ".", ".."):
        return safe
    return f"{safe}-{hashlib.sha256(edit_id.encode('utf-8')).hexdigest()[:10]}"


def _read_records(path: Path) -> dict[str, dict[str, Any]]:
    """Last successful record per id; a line cut short by a kill is ignored."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    for line in jsonl_lines(path.read_text(encoding="utf-8")):  # written raw: U+2028 stays inside its line
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("error") is None and rec.get("file") and rec.get("id") is not None:
            done[str(rec["id"])] = rec
    return done


def _valid_image(path: Path) -> bytes | None:
    """The file's bytes when it is a complete, decodable image; None otherwise."""
    from PIL import Image

    try:
        data = path.read_bytes()
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None
    return data


def _write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename: a kill never leaves half an image under the real name."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _Outputs:
    """`out_dir/<id>.<ext>` files plus `edits.jsonl`, appended and flushed per result."""

    def __init__(self, out_dir: Path):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.done = _read_records(self.dir / RECORDS)
        self._log = open(self.dir / RECORDS, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def existing(self, req: EditRequest, key: str) -> tuple[bytes, str, dict[str, Any]] | None:
        """Thread work: a valid earlier output for the same request (same key), or None."""
        rec = self.done.get(req.id)
        if rec is None or rec.get("request_key") != key:
            return None
        data = _valid_image(self.dir / str(rec["file"]))
        if data is None:
            return None
        return data, sniff_mime(data) or str(rec.get("mime") or "image/png"), rec

    def save(self, req: EditRequest, data: bytes, mime: str) -> Path:
        """Thread work: write the image as <stem>.<ext>."""
        path = self.dir / f"{file_stem(req.id)}.{_EXT.get(mime, 'png')}"
        _write_atomic(path, data)
        return path

    def log(self, result: EditResult, instruction: str) -> None:
        rec = {"id": result.id, "file": Path(result.path).name if result.path else None, "mime": result.mime,
               "request_key": result.request_key, "instruction": instruction, "error": result.error,
               "error_message": result.error_message, "usage": result.usage, "cached": result.cached,
               "source": result.source, "latency_s": round(result.latency_s, 4)}
        self._log.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._log.flush()

    def close(self) -> None:
        self._log.close()


# ---------------------------------------------------------------- running many edits


def edit_key(editor: ImageEditor, req: EditRequest, pipeline: ImagePipeline, transform: Transform,
             endpoint: str | None = None) -> str:
    """The cache key of an edit: request_key over a one-message request (never the API key); `endpoint`:
    another spelling of the editor's endpoint than today's."""
    spec = editor.spec
    params = GenParams.with_extra({**req.params, _TASK: "image_edit"})
    message = Message.user(ImagePart(req.image, transform), req.instruction)
    return request_key(provider=spec.provider, model=spec.model,
                       endpoint=spec.endpoint if endpoint is None else endpoint, params=params,
                       messages=(message,), source_hash=pipeline.source_hash)


def edit_keys(editor: ImageEditor, req: EditRequest, pipeline: ImagePipeline,
              transform: Transform) -> list[str]:
    """Today's key of an edit, then those earlier versions stored it under (the endpoint spelled as
    then: ProviderSpec.earlier_endpoints)."""
    return [edit_key(editor, req, pipeline, transform, e) for e in (None, *editor.spec.earlier_endpoints)]


def _from_cache(value: dict[str, Any]) -> tuple[bytes, str, Usage] | None:
    try:
        data = base64.b64decode(value["image_b64"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error):
        return None
    return data, sniff_mime(data) or str(value.get("mime") or "image/png"), Usage.from_dict(value.get("usage"))


async def run_edits(requests: Sequence[EditRequest], editor: ImageEditor, *, out_dir: Path, cache: CacheLike,
                    limiter: Limiter, pipeline: ImagePipeline, concurrency: int = 8, max_attempts: int = 6,
                    timeout_s: float = 300.0, progress: Callable[[EditResult], None] | None = None,
                    transform: Transform = Transform(), backoff_s: float = 0.5,
                    keep_images: bool = True) -> list[EditResult]:
    """Edit every request; returns results in request order, errors as values.

    Each request is served, in order of preference, by a valid output of an earlier run in
    out_dir (same request key), the response cache, or the editor. keep_images=False drops the
    bytes from the results (they are in the files) so a large run does not hold them all.
    """
    ids = [r.id for r in requests]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise EvalkitError(f"duplicate edit id '{dup}': ids name the output files and must be unique")
    policy = RetryPolicy(max_attempts=max_attempts, initial_s=backoff_s, timeout_s=timeout_s)
    outputs = await asyncio.to_thread(_Outputs, out_dir)
    results: list[EditResult | None] = [None] * len(requests)
    todo = iter(enumerate(requests))

    async def one(req: EditRequest) -> EditResult:
        keys = await asyncio.to_thread(edit_keys, editor, req, pipeline, transform)
        key = keys[0]
        for known in keys:
            earlier = await asyncio.to_thread(outputs.existing, req, known)
            if earlier is not None:
                data, mime, rec = earlier
                return EditResult(req.id, data, mime, None, True, dict(rec.get("usage") or {}),
                                  path=str(outputs.dir / str(rec["file"])), request_key=known,
                                  source="output")
        got = None
        for known in keys:
            hit = await asyncio.to_thread(cache.get, known) if cache.blocking else cache.get(known)
            got = _from_cache(hit) if hit is not None else None
            if got is not None:
                key = known
                break
        start = time.perf_counter()
        if got is not None:
            data, mime, usage = got
            source: Literal["network", "cache", "output"] = "cache"
        else:
            image = await asyncio.to_thread(pipeline.prepare, ImagePart(req.image, transform))
            try:
                data, mime, usage = await with_retries(
                    lambda: editor.edit(image, req.instruction, req.params), policy, limiter,
                    est_tokens=len(req.instruction) // 4 + 800,
                    tokens_of=lambda r: r[2].input_tokens + r[2].output_tokens)
            except ProviderError as e:
                return EditResult(req.id, None, None, e.kind, False, {}, error_message=e.message, request_key=key,
                                  latency_s=time.perf_counter() - start)
            mime = sniff_mime(data) or mime
            value = {"image_b64": base64.b64encode(data).decode("ascii"), "mime": mime, "usage": usage.to_dict()}
            if cache.blocking:
                await asyncio.to_thread(cache.set, key, value)
            else:
                cache.set(key, value)
            source = "network"
        path = await asyncio.to_thread(outputs.save, req, data, mime)
        return EditResult(req.id, data, mime, None, source == "cache", usage.to_dict(), path=str(path),
                          request_key=key, source=source, latency_s=time.perf_counter() - start)

    async def worker() -> None:
        for index, req in todo:
            result = await one(req)
            if result.source != "output":  # earlier outputs already have their line
                outputs.log(result, req.instruction)
            if not keep_images:
                result.image_bytes = None
            results[index] = result
            if progress is not None:
                progress(result)

    tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, min(concurrency, len(requests) or 1)))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:  # bad input (EvalkitError) or cancellation: stop the other workers first
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        outputs.close()
    return [r for r in results if r is not None]
