"""`--dry-run`: what a run would send and cost, sending nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import Runner
from evalkit.ask.store.cache import CacheLike, NullCache, ResponseCache
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.settings import RunConfig
from evalkit.core.types import Query
from evalkit.engine.endpoints.wiring import cache_seal
from evalkit.engine.resume import KeyOnlyProvider, sort_records_off_loop
from evalkit.images.pipeline import ImagePipeline
from evalkit.money.costs import plan_dry_run, records_cost
from evalkit.money.pricing import Price, estimate_cost, price_of
from evalkit.providers import ProviderSpec
from evalkit.rundir.layout import RunDir


async def dry_run(rundir: RunDir, queries: list[Query], spec: ProviderSpec, env: Mapping[str, str],
                  cfg: RunConfig, price: Price | None, bench: str, config: dict[str, Any]) -> dict[str, Any]:
    """Count, look up, estimate; send nothing, write nothing (not even an empty cache), lock nothing,
    and need no API key (the keys of requests are computed without a client). With --batch, the
    batch price beside the live one."""
    existing = rundir.load_records() if rundir.path.exists() else {}
    cache_dir = Path(cfg.cache_path(env))
    with contextlib.ExitStack() as stack:
        cache: CacheLike = (stack.enter_context(contextlib.closing(ResponseCache(cache_dir, cache_seal(cfg, env))))
                            if not cfg.no_cache and (cache_dir / "cache.db").is_file() else NullCache())
        pipeline = stack.enter_context(contextlib.closing(ImagePipeline()))
        runner = Runner(KeyOnlyProvider(spec), limiter=Limiter(concurrency=cfg.concurrency), cache=cache,
                        pipeline=pipeline)
        done = (await sort_records_off_loop({q.id: q for q in queries}, existing, runner.keys_of)).current
        rest = [q for q in queries if q.id not in done]
        plan = await asyncio.to_thread(plan_dry_run, rest, runner, price_of(price, None, cfg.service_tier))
    d: dict[str, Any] = {**plan.to_dict(), "n_queries": len(queries), "already_done": len(done)}
    if cfg.service_tier is not None:  # priced at the tier asked for (what --max-cost reserves too)
        d["service_tier"] = cfg.service_tier
    d.update(spent_so_far(cfg, env, price, existing.values(), d["notes"]))
    if cfg.until_ci is not None:  # the sample's length depends on its answers: the whole set is the ceiling
        d["notes"].append(f"--until-ci {cfg.until_ci:g}: priced for every query not yet answered; the sample stops "
                          f"asking once the headline's 95 % interval is ±{cfg.until_ci:g} points, usually earlier "
                          "(`evalkit plan` estimates where)")
    if cfg.batch:
        batch = price.batch() if price is not None else None
        d["batch"] = True
        d["batch_cost_low_usd"] = estimate_cost(batch, plan.input_tokens, plan.output_tokens_low)
        d["batch_cost_high_usd"] = estimate_cost(batch, plan.input_tokens, plan.output_tokens_high)
    return {"benchmark": bench, "model": spec.label, "dry_run": d, "config": config}


def spent_so_far(cfg: RunConfig, env: Mapping[str, str], price: Price | None, records: Iterable[Record],
                 notes: list[str]) -> dict[str, Any]:
    """What the run directory's records cost (or, with --shared-budget, the shared ledger's spending) and,
    with --max-cost, what is left of it."""
    spent = records_cost(price, records)
    d: dict[str, Any] = {"spent_usd": spent}
    if cfg.shared_budget is not None:
        from evalkit.money.shared_budget import SharedBudget  # lazy: redis-py only with a URL

        try:
            ledger = SharedBudget(str(cfg.shared_cache_url(env)), cfg.shared_budget, cfg.max_cost or 0.0)
        except EvalkitError as e:
            notes.append(f"the shared budget could not be read: {e}")
            return d
        ledger.close()
        d["shared_budget"], spent = cfg.shared_budget, ledger.spent
        d["shared_spent_usd"] = spent
    if cfg.max_cost is not None:
        d["max_cost_usd"] = cfg.max_cost
        d["budget_left_usd"] = max(0.0, cfg.max_cost - (spent or 0.0))
    return d


async def scaled_from_sample(sample_queries: list[Query], n_sample_items: int, n_items: int, spec: ProviderSpec,
                             env: Mapping[str, str], cfg: RunConfig, price: Price | None) -> dict[str, Any]:
    """The dry run of a set not downloaded yet: the bundled sample's own estimate (same benchmark, options
    and model) scaled to the published number of questions. The sample's images are smaller than most
    real ones, so the tokens are a floor more than a forecast; the dry run says so."""
    runner = Runner(KeyOnlyProvider(spec), limiter=Limiter(concurrency=cfg.concurrency), cache=NullCache(),
                    pipeline=ImagePipeline())
    try:
        plan = await asyncio.to_thread(plan_dry_run, sample_queries, runner, price_of(price, None, cfg.service_tier))
    finally:
        runner.pipeline.close()
    f = n_items / max(1, n_sample_items)

    def scale(v: float | None) -> float | None:
        return None if v is None else v * f

    return {"n_queries": round(plan.n_queries * f), "already_done": 0, "cached": 0, "to_send": round(plan.n_queries * f),
            "input_tokens": round(plan.input_tokens * f), "output_tokens_low": round(plan.output_tokens_low * f),
            "output_tokens_high": round(plan.output_tokens_high * f), "cost_low_usd": scale(plan.cost_low_usd),
            "cost_high_usd": scale(plan.cost_high_usd),
            "notes": [f"estimated from the bundled sample's {n_sample_items} items scaled to {n_items:,} "
                      f"(its images are small: real image tokens may be higher)", *plan.notes]}


MATRIX_SUMS = ("n_queries", "already_done", "cached", "to_send", "input_tokens", "output_tokens_low",
               "output_tokens_high", "cost_low_usd", "cost_high_usd", "batch_cost_low_usd", "batch_cost_high_usd")


def matrix_dry_run(pairs: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """A matrix's dry run: each (benchmark, label, dry run) pair's and their total. A cost no price is
    known for (or no count, the data not being here) is left out of the total, which names the pairs
    it lacks (`unpriced`)."""
    total: dict[str, Any] = {}
    unpriced: list[str] = []
    for bench, label, d in pairs:
        for key in MATRIX_SUMS:
            if key in d and d[key] is not None:
                total[key] = total.get(key, 0) + d[key]
        if d.get("cost_low_usd") is None:
            unpriced.append(f"{bench} · {label}")
    total["unpriced"] = unpriced
    return {"pairs": [{"benchmark": b, "model": label, **d} for b, label, d in pairs], "total": total}
