"""`evalkit report RUN_DIR`: re-score a finished (or interrupted) run from its records.

The model is never asked again; with --judge, unparsed answers go to the judge model
through the runner and the same cache, and records.jsonl is rewritten with the verdicts.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from evalkit.ask.cache import ResponseCache
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.benchmarks.prepare import prepare
from evalkit.core.settings import RunConfig
from evalkit.engine.identity import saved_settings
from evalkit.engine.rundir import RunDir
from evalkit.grading.grade import grade, judge_records, summarize
from evalkit.images.pipeline import ImagePipeline
from evalkit.providers import api_key_for, create_provider, parse_spec
from evalkit.report.outputs import publish


async def rereport(run_dir: Path, *, judge: str | None = None, judge_base_url: str | None = None,
                   cache_dir: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    env = env if env is not None else dict(os.environ)
    rundir = RunDir(run_dir)
    saved = rundir.read_config()
    identity, config = saved["identity"], saved["config"]
    judge_spec = parse_spec(judge, tuple((judge_base_url or "").replace(",", " ").split()), env) if judge else None
    if judge_spec:
        api_key_for(judge_spec, env)
    settings = saved_settings(saved)
    bench_opts = settings.bench_dict()
    bench, items, queries, _ = prepare(identity["benchmark"], bench_opts)
    by_id = {q.id: q for q in queries}
    records = rundir.load_records()
    mode = settings.config.mode
    ordered = [grade(bench, by_id[qid], records[qid], mode) for qid in by_id if qid in records]
    if judge_spec:
        async with contextlib.AsyncExitStack() as stack:
            cache = stack.enter_context(contextlib.closing(ResponseCache(Path(_cache_path(cache_dir, env)))))
            pipeline = stack.enter_context(contextlib.closing(ImagePipeline()))
            provider = create_provider(judge_spec, env)
            stack.push_async_callback(provider.close)
            concurrency = int(config.get("concurrency") or 32)
            runner = Runner(provider, limiter=Limiter(concurrency=concurrency), cache=cache, pipeline=pipeline,
                            policy=RetryPolicy(), fingerprints=False)
            await judge_records(bench, by_id, ordered, runner, workers=concurrency)
        config = {**config, "judge": judge_spec.label}
    rundir.rewrite_records(ordered)
    summary = summarize(bench, ordered, model=identity["model"], mode=mode, n_items=len(items),
                        n_queries=len(queries), options=bench_opts, config=config,
                        judge=judge_spec.label if judge_spec else config.get("judge"), queries=by_id)
    publish(rundir, summary, bench, ordered, bench_opts)
    return summary


def _cache_path(cache_dir: str | None, env: dict[str, str]) -> str:
    return RunConfig(cache_dir=cache_dir).cache_path(env)
