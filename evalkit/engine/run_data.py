"""The data a run reads, said plainly: what an existing run directory recorded (a run continues on its
own data), the `data_source` record with every file's sha256, and the label a run on the bundled
sample carries everywhere it is shown (never a silent sample)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.prepare import Prepared, prepare, resolve_data, resolve_images
from evalkit.benchmarks.readers.saved_index import LOCAL_FOLDER as INDEX_FOLDER
from evalkit.benchmarks.run_settings import RunSettings
from evalkit.core.errors import EvalkitError
from evalkit.core.files import IMAGE_SUFFIXES
from evalkit.core.resources import dataset_path
from evalkit.core.settings import RunConfig
from evalkit.data.registry import sources_for
from evalkit.data.source import DataSource, is_hub
from evalkit.providers import ProviderSpec
from evalkit.rundir.identity import FileHashes, data_fingerprint_parts, run_identity
from evalkit.rundir.layout import default_run_dir


def is_bundled_sample(path: str | Path, default_sample: str | None) -> bool:
    """A path to the bundled sample of this benchmark, from this install or any earlier one (a 0.1/0.2
    run recorded the path of the install it ran from)."""
    if not default_sample:
        return False
    tail = ("datasets", *Path(default_sample).parts)
    parts = Path(path).parts
    if parts[-len(tail):] == tail:
        return True
    try:
        return Path(path).resolve() == dataset_path(default_sample).resolve()
    except OSError:
        return False


def recorded_data(out: Path, default_sample: str | None) -> str | None:
    """The data an existing run directory was made on, as a `--data` value: `sample` for the bundled
    sample (whichever release made it), `hf://…@commit` for a Hub source, else the path it recorded."""
    try:
        config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    inner = config.get("config") if isinstance(config.get("config"), dict) else config
    source = inner.get("data_source") if isinstance(inner, dict) else None
    if isinstance(source, dict):
        src = DataSource.from_dict(source)
        if src.kind == "sample":
            return "sample"
        if src.kind == "hub" and src.commit:
            return f"{src.base_uri}@{src.commit}" + _hub_path(src.uri)
    path = inner.get("data") if isinstance(inner, dict) else None
    if not path:
        return None
    return "sample" if is_bundled_sample(str(path), default_sample) else str(path)


def _hub_path(uri: str) -> str:
    rest = uri.split("://", 1)[-1].split("/", 2)
    return "/" + rest[2] if len(rest) > 2 else ""


def with_files(prepared: Prepared, known: Mapping[str, tuple[int, int, str]]) -> DataSource:
    """The source with every data file's and image's sha256 (relative to the data's folder): a hub or
    archive source has its files already; a local folder's come from the hashes the fingerprint made."""
    source = prepared.source
    if source.files:
        return source
    root = prepared.data if prepared.data.is_dir() else prepared.data.parent
    files: dict[str, str] = {}
    for path, (_, _, sha) in known.items():
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        files[Path(rel).as_posix()] = sha
    return replace(source, files=files)


def data_files_read(prepared: Prepared) -> list[Path] | None:
    """The data files (not images) a run's fingerprint covers when the folder may hold more."""
    if not prepared.files:
        return None
    return [p for p in prepared.files if p.suffix.lower() not in IMAGE_SUFFIXES]


def prepare_data(s: RunSettings, spec: ProviderSpec, env: Mapping[str, str], say: Callable[[str], None]) -> Prepared:
    """The run's items on the data it names: `--data`, else what an existing `--out` recorded, else the
    benchmark's official source. An earlier run of this command on the bundled sample is named (it is
    not where this run goes: `--data sample` continues it)."""
    cfg = s.config
    opts = s.bench_dict()
    bench = get_benchmark(s.bench_name)
    if opts.get("data") is None and cfg.out:
        opts["data"] = recorded_data(Path(cfg.out), bench.default_data)
    official = opts.get("data") is None and bool(sources_for(s.bench_name, env))
    progress = None
    if cfg.progress:
        from evalkit.data.progress import download_bar

        progress = download_bar
    try:
        prepared = prepare(s.bench_name, opts, env=env, progress=progress, index_write=not cfg.dry_run,
                           index_dir=None if cfg.no_cache else Path(cfg.cache_path(env)) / INDEX_FOLDER)
    except EvalkitError as e:
        earlier = _earlier_sample_run(s, spec, opts, env) if official else None
        if earlier is None:
            raise
        raise EvalkitError(f"{e}; the earlier run of this command on the bundled sample is {earlier}: "
                           f"`--data sample` continues it") from None
    for note in (*prepared.notes, *prepared.bench.load_notes()):  # what reading the data changed, said once
        say(note)
    if official:
        earlier = _earlier_sample_run(s, spec, opts, env)
        if earlier is not None:
            say(f"this run reads the benchmark itself; the earlier run of this command on the bundled sample is "
                f"{earlier} (`--data sample` continues it)")
    return prepared


def _earlier_sample_run(s: RunSettings, spec: ProviderSpec, opts: Mapping[str, Any], env: Mapping[str, str]
                        ) -> Path | None:
    try:
        sample = prepare(s.bench_name, {**opts, "data": "sample"}, env=env)
        path = default_dir_for(s, spec, sample)
    except (EvalkitError, OSError):
        return None
    return path if (path / "config.json").is_file() else None


def default_dir_for(s: RunSettings, spec: ProviderSpec, prepared: Prepared) -> Path:
    """The default run directory of this command on this data, computing nothing to disk."""
    data = data_fingerprint_parts(prepared.data, prepared.items, FileHashes(None), resolve_images(s.config.images),
                                  only=data_files_read(prepared))
    return default_run_dir(s.bench_name, spec.label, run_identity(s.bench_name, s.options, s.config, spec.label,
                                                                  spec.endpoint, data.sha256))


def download_plan(s: RunSettings, env: Mapping[str, str]) -> dict[str, Any] | None:
    """--dry-run on data not yet downloaded: what would be fetched (from the source's listing), before
    anything is; None when the data is local (the dry run then counts questions and prices them)."""
    opts = s.bench_dict()
    data = opts.get("data")
    if data is None and s.config.out:
        data = recorded_data(Path(s.config.out), get_benchmark(s.bench_name).default_data)
    if not (data is None and sources_for(s.bench_name, env)) and not is_hub(data):
        return None
    plan = resolve_data(get_benchmark(s.bench_name), data, opts, env, plan_only=True)
    if not plan.pending:
        return None
    size = sum(plan.pending.values())
    where = ", ".join(f"{p.uri} @ {p.commit[:12]}" if p.commit else p.uri for p in plan.parts or (plan.source,))
    notes = [f"the data is not here yet: {len(plan.pending)} files, {size / 1e9:.2f} GB to download from {where}",
             f"`evalkit data pull {s.bench_name}` (or the run itself) downloads it; the same --dry-run then counts "
             f"and prices every question exactly"]
    if s.config.limit:
        notes.append("--limit asks fewer questions but does not shrink the download: the whole set is fetched once")
    questions = [q for e in sources_for(s.bench_name, env) if (q := e.questions_for(opts)) is not None] \
        if data is None else []
    return {"data": where, "download_files": len(plan.pending), "download_bytes": size, "notes": notes,
            **({"questions": sum(questions)} if questions else {})}


def prepare_sample(s: RunSettings, env: Mapping[str, str]) -> Prepared:
    """The bundled sample under the run's options, every item (what a dry run scales from)."""
    return prepare(s.bench_name, {**s.bench_dict(), "data": "sample", "limit": None}, env=env)


def index_places(run_dir: Path, cache_dir: str | None, env: Mapping[str, str]) -> tuple[Path | None, tuple[Path, ...]]:
    """Where `evalkit report` and `evalkit view` find the saved indexes of a run's local data files, so
    they read the index, not the data: the `data-index/` of the cache folders that run may have used, of
    those that exist: `--cache-dir` when given, the one its manifest.json records (`cache_dir`, written
    by runs since 0.4), then EVALKIT_CACHE_DIR or ./cache (a run that recorded none used the default).
    The first is where a missing index is made; (None, ()) when no cache folder exists (nothing made)."""
    recorded = None
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        recorded = manifest.get("cache_dir") if isinstance(manifest, dict) else None
    except (OSError, ValueError):
        pass
    candidates = [c for c in (cache_dir, recorded if isinstance(recorded, str) else None,
                              RunConfig().cache_path(env)) if c]
    folders: list[Path] = []
    for c in candidates:
        path = Path(c).expanduser()
        if path.is_dir() and all(not path.samefile(f.parent) for f in folders):
            folders.append(path / INDEX_FOLDER)
    return (folders[0], tuple(folders[1:])) if folders else (None, ())
