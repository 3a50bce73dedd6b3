"""`evalkit compare --continue RUN...`: runs on the same items continued together until every pair is decided.

Each run is rebuilt from its run directory (config.json: the benchmark, the model, the data, the
benchmark's options, the generation and delivery settings) and continued *in that directory*, all
of them at once as a matrix with `--until-decided` (multi/matrix.py, multi/deciding.py): one seeded
order, a group counting for a pair once both runs have it, each run stopping once every pair it is
in is decided. Answers already in a run are kept and counted; only new items are asked. What is not
in a run directory comes from the environment, as for any run: keys and base URLs
(`VLLM_BASE_URL`, `OPENAI_API_KEY`, ...).

Runs not on the same items (another benchmark, other data, another shard, other protocol options, a
`--limit`) are refused in one line naming them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from evalkit.benchmarks import benchmark_class
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig, field_names
from evalkit.engine.stopping.in_thread import run_blocking
from evalkit.multi.matrix import MatrixResult, run_matrix_async
from evalkit.multi.suite import BenchEntry, ModelEntry
from evalkit.rundir.identity import protocol_view

# config.json's delivery settings a continued run keeps (its identity holds the rest)
KEPT = ("concurrency", "rpm", "tpm", "max_attempts", "group_images", "repeats", "judge", "service_tier", "images")
PER_MODEL_IDENTITY = {"model", "endpoint", "cache_tag", "max_tokens", "temperature", "seed", "top_p", "extra",
                      "max_side", "max_pixels", "reasoning_effort", "thinking_budget", "detail", "media_resolution", "api"}


@dataclass(frozen=True)
class SavedRun:
    """One run directory, as config.json says it was run."""

    path: Path
    bench: str
    model: str
    data: str
    bench_options: dict[str, Any]
    settings: dict[str, Any]  # RunConfig's, the directory as --out
    same_items: dict[str, Any]  # what must agree between the runs: benchmark, data, shard, protocol
    seed: int | None  # the seed of its sample's order, if it is a sample


def read_run(path: Path) -> SavedRun:
    """A run directory's settings, for continuing it; EvalkitError naming the directory when unreadable."""
    try:
        saved = json.loads((path / "config.json").read_text(encoding="utf-8"))
        identity, config = saved["identity"], saved.get("config") or {}
        bench, model = str(identity["benchmark"]), str(identity["model"])
        bench_names = {f.name for f in fields(benchmark_class(bench).Options)}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EvalkitError(f"compare --continue: {path}: not a run directory evalkit can continue "
                           f"(config.json: {e})") from e
    if identity.get("limit") is not None:
        raise EvalkitError(f"compare --continue: {path} was run with --limit {identity['limit']}: its items are "
                           "the first of the file, not a seeded sample; run it without --limit first")
    run_names = set(field_names(RunConfig)) - {"model", "limit", "data", "out"}
    options = {k: v for k, v in (config.get("options") or {}).items() if k in bench_names}
    options.update({k: v for k, v in identity.items() if k in bench_names})
    settings = {k: v for k, v in identity.items() if k in run_names and k not in bench_names}
    settings.update({k: config[k] for k in KEPT if config.get(k) is not None and k in run_names})
    settings["out"] = str(path)
    protocol = protocol_view(identity)
    same = {k: v for k, v in protocol.items() if k not in PER_MODEL_IDENTITY}
    try:
        block = json.loads((path / "summary.json").read_text(encoding="utf-8")).get("sample")
        seed = int(block["seed"]) if isinstance(block, dict) and block.get("seed") is not None else None
    except (OSError, ValueError, AttributeError, TypeError):
        seed = None
    data = config.get("data") or identity.get("data")
    if not data:
        raise EvalkitError(f"compare --continue: {path}: config.json does not say where its data is")
    return SavedRun(path, bench, model, str(data), options, settings, same, seed)


def check_same_items(runs: Sequence[SavedRun]) -> None:
    """One line naming the runs that are not on the first run's items."""
    if len(runs) < 2:
        raise EvalkitError("compare --continue needs two or more run directories")
    first = runs[0]
    for run in runs[1:]:
        if run.same_items != first.same_items:
            keys = sorted(k for k in set(run.same_items) | set(first.same_items)
                          if run.same_items.get(k) != first.same_items.get(k))
            shown = "; ".join(f"{k}: {first.same_items.get(k)!r} and {run.same_items.get(k)!r}" for k in keys)
            raise EvalkitError(f"compare --continue: {first.path} and {run.path} are not on the same items ({shown})")


def matrix_of(runs: Sequence[SavedRun]) -> tuple[list[BenchEntry], list[ModelEntry]]:
    """The runs as one benchmark by their models, each model continuing in its own directory."""
    first = runs[0]
    images = first.settings.get("images")
    bench = BenchEntry(first.bench, data=first.data, images=images, options=dict(first.bench_options))
    specs = [r.model for r in runs]
    models = [ModelEntry(r.model, label=r.model if specs.count(r.model) == 1 else f"{r.model} ({r.path.name})",
                         settings={k: v for k, v in r.settings.items() if k != "images"}) for r in runs]
    return [bench], models


def continue_options(runs: Sequence[SavedRun], given: Mapping[str, Any]) -> dict[str, Any]:
    """The matrix's options: until decided, in the runs' own order (their samples' seed when they agree)."""
    seeds = {r.seed for r in runs if r.seed is not None}
    seed = given.get("sample_seed")
    if seed is None:
        seed = seeds.pop() if len(seeds) == 1 else 0
    return {**{k: v for k, v in given.items() if v is not None}, "until_decided": True, "sample_seed": seed}


def continue_runs(run_dirs: Sequence[str | Path], **options: Any) -> MatrixResult:
    """`continue_runs_async` from synchronous code (multi/matrix.py's run_blocking)."""
    return run_blocking(lambda: continue_runs_async(run_dirs, **options))


async def continue_runs_async(run_dirs: Sequence[str | Path], *, compare_dir: str | Path | None = None,
                              **options: Any) -> MatrixResult:
    """Continue the runs together until every pair is decided, then compare them (in `compare_dir`, else
    runs/compare-<bench>). `options`: `width`, `sample_seed`, `cache_dir`, `progress`, `plots`, and the
    hooks `evalkit.run` takes (env, console, quiet)."""
    runs = [read_run(Path(d)) for d in run_dirs]
    check_same_items(runs)
    benches, models = matrix_of(runs)
    return await run_matrix_async(benches, models, compare_dir=compare_dir, **continue_options(runs, options))
