"""Load and expand a benchmark's queries: what a run, a re-report and the simulator's answer key
all need, below the engine so the simulator never imports it.

`options` is the flat dict the benchmarks read: the benchmark's options plus the run's data,
images, limit and generation settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.base import Benchmark
from evalkit.benchmarks.readers.saved_index import Indexing, indexing, indexing_of
from evalkit.core.errors import EvalkitError
from evalkit.core.shard import parse_shard
from evalkit.core.types import Item, Query
from evalkit.data.request import DataRequest, Progress, Resolved
from evalkit.data.resolve import resolve_source
from evalkit.data.source import DataSource
from evalkit.grading.answer_schema import apply_structured


class Prepared(NamedTuple):
    bench: Benchmark
    items: list[Item]
    queries: list[Query]
    data: Path  # resolved data file or folder (under the Hub cache: the snapshot path, links kept)
    source: DataSource = DataSource("local", "")  # where the data came from
    files: tuple[Path, ...] = ()  # the data files read, where `data` is a folder that may hold more
    notes: tuple[str, ...] = ()  # what reading the data has to say once (a listing without hashes)
    parts: tuple[DataSource, ...] = ()  # every source read, where the benchmark's data has more than one
    # the data files' saved indexes: the files' sha256 (`hashes`), the images' (`image_hashes`), where they are
    index: Indexing | None = None


def resolve_images(images: str | Path | None) -> Path | None:
    path = Path(images).expanduser().resolve() if images else None
    if path is not None and not path.is_dir():
        raise EvalkitError(f"--images: not a directory: {path}")
    return path


def resolve_data(bench: Benchmark, data: str | Path | None, options: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None, progress: Progress | None = None,
                 plan_only: bool = False) -> Resolved:
    """`--data` (a path, "sample", "hf://…", or None: the benchmark's official source) to files on disk."""
    opts = dict(options or {})
    lock = opts.get("lock")
    return resolve_source(DataRequest(bench.name, data, opts, os.environ if env is None else env,
                                      lock_path=Path(lock) if lock else None, default_sample=bench.default_data,
                                      progress=progress, plan_only=plan_only))


# What --extra may not set: it would change what the run is (another model, other prompts or images)
# while the records and the cache key name the original; or a reply evalkit cannot read (a stream).
RESERVED_EXTRA = {
    "model": "use --model",
    "messages": "the benchmark builds the prompt and images",
    "contents": "the benchmark builds the prompt and images",
    "system": "the benchmark builds the prompt",
    "system_instruction": "the benchmark builds the prompt",
    "systemInstruction": "the benchmark builds the prompt",
    "stream": "evalkit reads whole replies",
}


def apply_generation(queries: list[Query], opts: Mapping[str, Any]) -> list[Query]:
    """Run-level generation overrides (max_tokens, temperature, seed, extra) on top of each
    benchmark's own defaults. `extra` is a dict (the settings layer parsed the JSON)."""
    extra = opts.get("extra") or {}
    for key in extra:
        if key in RESERVED_EXTRA:
            raise EvalkitError(f"--extra cannot set '{key}' ({RESERVED_EXTRA[key]})")
    if opts.get("provider_routing"):  # OpenRouter's body field: in the request, so in its cache key
        extra = {**extra, "provider": opts["provider_routing"]}
    changes: dict[str, Any] = {k: opts[k] for k in ("max_tokens", "temperature", "seed", "reasoning_effort",
                                                    "thinking_budget", "detail", "media_resolution")
                               if opts.get(k) is not None}
    if opts.get("api") == "responses":  # the Responses route is in the request (and key); chat is as before
        changes["api"] = "responses"
    if not changes and not extra:
        return queries
    out = []
    for q in queries:
        params = replace(q.params, **changes)
        if extra:
            params = replace(params, extra=tuple(sorted({**params.extra_dict(), **extra}.items())))
        out.append(replace(q, params=params))
    return out


def check_image_paths(items: Iterable[Item], roots: Iterable[Path], where: Path) -> None:
    """Every image path must lead inside the data folder or --images (after `..` and symlinks): a data
    file naming `/home/me/.ssh/…` or `../../elsewhere` would otherwise have it read and uploaded."""
    inside = [os.path.realpath(r) for r in roots]
    real_dirs: dict[str, str] = {}
    checked: dict[str, bool] = {}  # each distinct path once: questions share pictures

    def allowed(path: str) -> bool:
        known = checked.get(path)
        if known is None:
            known = checked[path] = inside_roots(path)
        return known

    def inside_roots(path: str) -> bool:
        path = os.path.abspath(path)
        if os.path.islink(path):
            real = os.path.realpath(path)
        else:  # one realpath per folder, not per file
            folder, name = os.path.split(path)
            if folder not in real_dirs:
                real_dirs[folder] = os.path.realpath(folder)
            real = os.path.join(real_dirs[folder], name)
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in inside)

    for item in items:
        for ref in item.images:
            if ref.kind == "path" and not allowed(str(ref.value)):
                raise EvalkitError(f"{where}: item '{item.id}': image {ref.value} is outside the data folder"
                                   f"{' and the image folders given' if len(inside) > 1 else ''}; pass "
                                   f"--allow-outside-images to read it anyway")


def prepare(bench_name: str, options: Mapping[str, Any], env: Mapping[str, str] | None = None,
            progress: Progress | None = None, index_dir: Path | None = None, index_write: bool = True,
            index_also: tuple[Path, ...] = ()) -> Prepared:
    """The benchmark's items and queries under these options; duplicate query ids are an error.
    `index_dir`: where the saved indexes of local data files go (the cache folder's data-index/; a
    registered source's go beside the Hub cache); `index_write` False: read, never written; `index_also`:
    more folders their indexes are looked for in (a re-report's: the cache folders its run may have used)."""
    opts = dict(options)
    bench = get_benchmark(bench_name)
    resolved = resolve_data(bench, opts.get("data"), opts, env, progress)
    for key, value in resolved.option_defaults.items():  # e.g. the images a second official source holds
        if not opts.get(key):
            opts[key] = value
    data = resolved.path
    images = resolve_images(opts.get("images"))
    ix = indexing_of(os.environ if env is None else env, index_dir, resolved.indexes, index_write, index_also)
    with indexing(ix):
        items = bench.load(data, images, opts)
    if not opts.get("allow_outside_images"):  # folders the user named: the data's, --images, --translated-images
        folders = [Path(v).expanduser() for k, v in opts.items() if k.endswith("images") and isinstance(v, str) and v]
        check_image_paths(items, [data if data.is_dir() else data.parent, *folders, *resolved.roots], data)
    if opts.get("limit"):
        items = items[: int(opts["limit"])]
    queries = apply_generation(list(bench.expand(items, opts)), opts)
    if opts.get("structured"):  # --structured (robust mode): each answer's schema, in its request
        queries = apply_structured(queries, bench.answer_schema)
    if not queries:  # a score over nothing reads like a score: 0.1.0 reported "Avg 0.00" on 0 items
        skipped = getattr(bench, "skipped", None)
        why = f"all {len(skipped)} were skipped (image files missing)" if skipped else "it holds no items"
        raise EvalkitError(f"{data}: nothing to evaluate: {why}")
    seen: set[str] = set()
    for q in queries:
        if q.id in seen:
            raise EvalkitError(f"{data}: duplicate query id '{q.id}'")
        seen.add(q.id)
    if opts.get("shard"):  # after --limit, so the shards of a run partition exactly its queries; the items stay
        shard = parse_shard(opts["shard"])  # whole: the data's fingerprint (the identity) is the unsharded run's
        queries = [q for q in queries if shard.holds(q.item_id)]
    return Prepared(bench, items, queries, data, resolved.source, resolved.local_files,
                    (*resolved.notes, *(ix.notes if ix else ())), resolved.parts if len(resolved.parts) > 1 else (), ix)
