"""One run, end to end: load -> expand -> ask -> parse -> (judge) -> aggregate -> write.

`run()` is the Python API (DESIGN.md); the CLI is a thin layer over it. Re-running with the
same settings resumes in the same run directory and sends only what is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.ask.cache import CacheLike, NullCache, ResponseCache
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Outcome, RetryPolicy, Runner
from evalkit.ask.schedule import group_by_image, image_group
from evalkit.benchmarks import get_benchmark
from evalkit.benchmarks.base import Benchmark
from evalkit.core.errors import EvalkitError
from evalkit.core.resources import dataset_path
from evalkit.core.types import GenParams, Item, Query, Record
from evalkit.engine.rundir import RunDir, default_run_dir
from evalkit.grading.grade import grade, judge_records, make_record, summarize
from evalkit.images.pipeline import ImagePipeline
from evalkit.money.costs import CostMeter, plan_dry_run, records_cost
from evalkit.money.pricing import Price, load_prices
from evalkit.providers import ProviderSpec, api_key_for, create_provider, parse_spec
from evalkit.report.outputs import publish
from evalkit.report.progress import RunProgress

# Options that change what is asked or how it is scored: they make a run's identity.
GENERATION_KEYS = ("max_tokens", "temperature", "seed", "extra")
DEFAULTS: dict[str, Any] = {
    "mode": "official", "concurrency": 32, "rpm": None, "tpm": None, "timeout": 120.0, "max_attempts": 8,
    "cache_dir": os.environ.get("EVALKIT_CACHE_DIR", "cache"), "no_cache": False, "limit": None,
    "base_url": None, "judge": None, "judge_base_url": None, "out": None, "data": None, "images": None,
    "progress": True, "max_side": None, "max_pixels": None, "dry_run": False, "max_cost": None, "prices": None,
    "group_images": True,
}
# Options that never enter a run's identity (how fast, where, how verbose).
OPERATIONAL_KEYS = {"concurrency", "rpm", "tpm", "timeout", "max_attempts", "cache_dir", "no_cache", "out",
                    "judge", "judge_base_url", "progress", "env", "console", "base_url", "on_record",
                    "dry_run", "max_cost", "prices", "group_images"}


@dataclass
class RunResult:
    summary: dict[str, Any]
    records: list[Record]
    out_dir: Path
    exit_code: int = 0
    messages: list[str] = field(default_factory=list)


def run(bench: str, model: str, **options: Any) -> RunResult:
    """Evaluate `model` (e.g. "openai/gpt-4o") on benchmark `bench`; see `evalkit run --help` for options."""
    return asyncio.run(run_async(bench, model, **options))


def _base_urls(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str):
        return tuple(u for u in value.replace(",", " ").split() if u)
    return tuple(value)


def resolve_data(bench: Benchmark, data: str | Path | None) -> Path:
    if data is None:
        if bench.default_data is None:
            raise EvalkitError(f"benchmark '{bench.name}' needs --data")
        path = dataset_path(bench.default_data)
    else:
        path = Path(data).expanduser()
    if not path.exists():
        raise EvalkitError(f"data not found: {path}")
    return path.resolve()


def apply_generation(queries: list[Query], opts: Mapping[str, Any]) -> list[Query]:
    """CLI/API generation overrides on top of each benchmark's own defaults."""
    extra = opts.get("extra")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError as e:
            raise EvalkitError(f"--extra is not valid JSON: {e}") from e
        if not isinstance(extra, dict):
            raise EvalkitError("--extra must be a JSON object")
    changes: dict[str, Any] = {k: opts[k] for k in ("max_tokens", "temperature", "seed") if opts.get(k) is not None}
    if not changes and not extra:
        return queries
    out = []
    for q in queries:
        params = replace(q.params, **changes)
        if extra:
            params = replace(params, extra=tuple(sorted({**params.extra_dict(), **extra}.items())))
        out.append(replace(q, params=params))
    return out


def prepare(bench_name: str, opts: dict[str, Any]) -> tuple[Benchmark, list[Item], list[Query], Path]:
    """Load and expand a benchmark's queries (shared by run, report and the simulator's answer key)."""
    bench = get_benchmark(bench_name)
    data = resolve_data(bench, opts.get("data"))
    images = Path(opts["images"]).expanduser().resolve() if opts.get("images") else None
    if images is not None and not images.is_dir():
        raise EvalkitError(f"--images: not a directory: {images}")
    items = bench.load(data, images, opts)
    if opts.get("limit"):
        items = items[: int(opts["limit"])]
    queries = apply_generation(list(bench.expand(items, opts)), opts)
    seen: set[str] = set()
    for q in queries:
        if q.id in seen:
            raise EvalkitError(f"{data}: duplicate query id '{q.id}'")
        seen.add(q.id)
    return bench, items, queries, data


def identity_of(bench: Benchmark, spec: ProviderSpec, data: Path, opts: Mapping[str, Any]) -> dict[str, Any]:
    ident = {k: v for k, v in opts.items() if k not in OPERATIONAL_KEYS and k not in ("data",) and v is not None}
    ident.update(benchmark=bench.name, model=spec.label, endpoint=spec.endpoint, data=str(data))
    return json.loads(json.dumps(ident, sort_keys=True, default=str))


async def run_async(bench_name: str, model: str, **options: Any) -> RunResult:
    opts = {**DEFAULTS, **options}
    env: Mapping[str, str] = opts.get("env") or os.environ
    console: Console = opts.get("console") or Console(stderr=True)
    if opts["mode"] not in ("official", "robust"):
        raise EvalkitError(f"--mode must be official or robust, not '{opts['mode']}'")
    spec, judge_spec = await _specs(model, opts, env)
    bench, items, queries, data = prepare(bench_name, opts)
    price = load_prices(Path(opts["prices"]) if opts.get("prices") else None).lookup(spec.provider, spec.model)
    if opts.get("max_cost") is not None and price is None:
        raise EvalkitError(f"--max-cost needs a price for {spec.label}; none is known (add one with --prices FILE)")
    identity = identity_of(bench, spec, data, opts)
    out = Path(opts["out"]) if opts["out"] else default_run_dir(bench.name, spec.label, identity)
    rundir = RunDir(out)
    config = {**identity, "judge": opts["judge"], "concurrency": opts["concurrency"], "rpm": opts["rpm"],
              "tpm": opts["tpm"], "timeout_s": opts["timeout"], "max_attempts": opts["max_attempts"],
              "group_images": opts["group_images"], "price": price.__dict__ if price else None,
              "generation": queries[0].params.to_dict() if queries else GenParams().to_dict()}
    by_id = {q.id: q for q in queries}
    if opts.get("dry_run"):
        return await _dry_run(rundir, queries, spec, env, opts, price, bench.name, config)
    rundir.bind(identity, config)
    existing = rundir.load_records()
    kept = {qid: r for qid, r in existing.items() if qid in by_id and r.error is None}
    if rundir.records_path.exists():
        rundir.rewrite_records(kept.values())  # drop errors left by an earlier attempt and any torn line
    todo = [q for q in queries if q.id not in kept]
    if opts["group_images"]:
        todo = list(group_by_image(todo, window=int(opts["concurrency"])))

    cache = NullCache() if opts["no_cache"] else ResponseCache(Path(opts["cache_dir"]))
    pipeline = ImagePipeline()
    runner = _runner(spec, env, opts, cache, pipeline)
    if queries:  # every value used, as the provider sends it (e.g. thinking budgets, dropped fields)
        config["generation_sent"] = runner.provider.describe_params(queries[0].params)
        rundir.write_config(identity, config)
    records = dict(kept)
    fresh: set[str] = set()
    mode = opts["mode"]
    meter = CostMeter(price)
    max_cost = opts.get("max_cost")
    on_record = opts.get("on_record")  # a hook for tests and embedding tools: called after each record

    def sink(outcome: Outcome) -> None:
        rec = grade(bench, outcome.query, make_record(outcome, spec.label), mode)
        records[rec.query_id] = rec
        fresh.add(rec.query_id)
        rundir.append(rec)
        meter.add(outcome)
        progress.advance(outcome)
        if on_record is not None:
            on_record()

    def over_budget() -> bool:
        return max_cost is not None and meter.spent_usd >= float(max_cost)

    try:
        with RunProgress(len(todo), f"{bench.name} · {spec.label}", console, enabled=opts["progress"]) as progress:
            if todo:
                await runner.run(todo, sink, workers=int(opts["concurrency"]), stop=over_budget,
                                 group_of=image_group if opts["group_images"] else None)
    finally:
        rundir.close()
        await runner.provider.close()

    # records of this run were graded in the sink; only those resumed from disk need it
    ordered = [records[qid] if qid in fresh else grade(bench, by_id[qid], records[qid], mode)
               for qid in by_id if qid in records]
    if judge_spec:
        judge_runner = _runner(judge_spec, env, {**opts, "rpm": None, "tpm": None}, cache, pipeline,
                               fingerprints=False)
        try:
            await judge_records(bench, by_id, ordered, judge_runner, workers=int(opts["concurrency"]))
        finally:
            await judge_runner.provider.close()
    cache.close()
    pipeline.close()
    rundir.rewrite_records(ordered)
    summary = summarize(bench, ordered, model=spec.label, mode=mode, n_items=len(items), n_queries=len(queries),
                        options=opts_for_bench(opts), config=config, judge=judge_spec.label if judge_spec else None,
                        queries=by_id)
    summary["usage"]["cost_usd"] = records_cost(price, ordered)
    messages = []
    if over_budget():
        messages.append(f"--max-cost reached: spent ${meter.spent_usd:.4f} of ${float(max_cost):.4f} in this run; "
                        f"{summary['missing']} queries not sent; re-run the same command to resume")
        summary["stopped"] = "max_cost"
    publish(rundir, summary, bench, ordered, opts_for_bench(opts))
    code = 0 if summary["complete"] else 1
    return RunResult(summary, ordered, rundir.path, code, messages)


async def _specs(model: str, opts: Mapping[str, Any], env: Mapping[str, str]
                 ) -> tuple[ProviderSpec, ProviderSpec | None]:
    """The model's and the judge's specs; missing keys are errors before any work starts."""
    spec = parse_spec(model, _base_urls(opts["base_url"]), env)
    if opts.get("cache_tag"):
        spec = replace(spec, cache_tag=str(opts["cache_tag"]))
    api_key_for(spec, env)
    spec = await resolve_auto(spec, env)
    judge_spec = parse_spec(opts["judge"], _base_urls(opts["judge_base_url"]), env) if opts["judge"] else None
    if judge_spec:
        api_key_for(judge_spec, env)
    return spec, judge_spec


def _runner(spec: ProviderSpec, env: Mapping[str, str], opts: Mapping[str, Any], cache: CacheLike,
            pipeline: ImagePipeline, fingerprints: bool = True) -> Runner:
    provider = create_provider(spec, env, timeout_s=float(opts["timeout"]))
    limiter = Limiter(concurrency=int(opts["concurrency"]), rpm=opts["rpm"], tpm=opts["tpm"])
    policy = RetryPolicy(max_attempts=int(opts["max_attempts"]), timeout_s=float(opts["timeout"]))
    return Runner(provider, limiter=limiter, cache=cache, pipeline=pipeline, policy=policy,
                  fingerprints=fingerprints)


async def _dry_run(rundir: RunDir, queries: list[Query], spec: ProviderSpec, env: Mapping[str, str],
             opts: Mapping[str, Any], price: Price | None, bench: str, config: dict[str, Any]) -> RunResult:
    """Count, look up, estimate; send nothing and write nothing."""
    done = {qid for qid, r in rundir.load_records().items() if r.error is None} if rundir.path.exists() else set()
    rest = [q for q in queries if q.id not in done]
    cache = NullCache() if opts["no_cache"] else ResponseCache(Path(opts["cache_dir"]))
    pipeline = ImagePipeline()
    runner = _runner(spec, env, opts, cache, pipeline)
    try:
        plan = await asyncio.to_thread(plan_dry_run, rest, runner, price)
    finally:
        cache.close()
        pipeline.close()
        await runner.provider.close()
    summary = {"benchmark": bench, "model": spec.label, "dry_run": {**plan.to_dict(), "n_queries": len(queries),
                                                                    "already_done": len(done)},
               "config": config}
    return RunResult(summary, [], rundir.path, 0)


async def resolve_auto(spec: ProviderSpec, env: Mapping[str, str]) -> ProviderSpec:
    """`vllm/auto`: the one model the server lists at /v1/models."""
    if spec.model != "auto" or spec.provider not in ("vllm", "openai-compatible"):
        return spec
    from evalkit.providers.openai_compat import served_models

    names = await served_models(spec.base_urls[0], api_key_for(spec, env))
    if len(names) != 1:
        raise EvalkitError(f"{spec.label}: {spec.base_urls[0]} serves {len(names)} models "
                           f"({', '.join(names) or 'none'}); name one with --model {spec.provider}/NAME")
    return replace(spec, model=names[0])


def opts_for_bench(opts: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in opts.items() if k not in ("env", "console", "on_record")}

