"""What a run asks through: the model's and the judge's specs, the response cache, and a runner
(provider, limiter, retry policy; or a provider's batch API) whose provider the run's exit stack closes."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from evalkit.ask.claims import owner_token
from evalkit.ask.confirm import Confirmation
from evalkit.ask.rate_limiter import Limiter
from evalkit.ask.runner import RetryPolicy, Runner
from evalkit.ask.shared.limits import scope_of
from evalkit.ask.store.cache import CacheLike, NullCache, ResponseCache
from evalkit.ask.store.seal import CacheSeal
from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig
from evalkit.core.tiers import STANDARD
from evalkit.engine.endpoints.batching import batch_runner
from evalkit.images.pipeline import ImagePipeline
from evalkit.money.pricing import Price
from evalkit.providers import (
    ProviderSpec,
    api_key_for,
    create_provider,
)


def open_cache(cfg: RunConfig, env: Mapping[str, str],
               say: Callable[[str], None] = lambda line: None) -> contextlib.AbstractContextManager[CacheLike]:
    """The run's response cache: none, the local folder, or (--cache-url) Redis with the local folder in front."""
    url = cfg.shared_cache_url(env)
    if url and cfg.no_cache:
        raise EvalkitError("--no-cache and --cache-url (or EVALKIT_CACHE_URL) contradict each other: give one")
    seal = cache_seal(cfg, env)
    if url:
        from evalkit.ask.shared.cache import open_shared  # redis-py only with a URL

        return contextlib.closing(open_shared(url, Path(cfg.cache_path(env)), seal=seal,
                                              fallback=cfg.cache_fallback == "local", say=say))
    cache: CacheLike = NullCache() if cfg.no_cache else ResponseCache(Path(cfg.cache_path(env)), seal)
    return contextlib.closing(cache)


def cache_seal(cfg: RunConfig, env: Mapping[str, str]) -> CacheSeal:
    """How the run's cache seals and checks its entries: EVALKIT_CACHE_SECRET, --cache-signed-only."""
    return CacheSeal.from_env(env, cfg.cache_signed_only)


class EndpointLimiters:
    """One Limiter per model endpoint (provider, URL, model) for runs that share an event loop (the pairs
    of a model x benchmark matrix): --concurrency, --rpm and --tpm then hold per endpoint, shared by
    every run that asks it, and a slow endpoint's queue holds back no other. (With a shared cache the
    limits are shared through it instead, by every process.)"""

    def __init__(self) -> None:
        self._by: dict[tuple[str, tuple[str, ...], str], Limiter] = {}

    def get(self, spec: ProviderSpec) -> Limiter | None:
        return self._by.get(_endpoint_key(spec))

    def put(self, spec: ProviderSpec, limiter: Limiter) -> None:
        self._by[_endpoint_key(spec)] = limiter


def _endpoint_key(spec: ProviderSpec) -> tuple[str, tuple[str, ...], str]:
    return spec.provider, tuple(sorted(spec.base_urls)), spec.model


async def make_runner(stack: contextlib.AsyncExitStack, spec: ProviderSpec, env: Mapping[str, str], cfg: RunConfig,
                  cache: CacheLike, pipeline: ImagePipeline, fingerprints: bool = True,
                  gate: Callable[[], Awaitable[None]] | None = None, batch_dir: Path | None = None,
                  price: Price | None = None, budget_left: Callable[[], float | None] | None = None,
                  confirm: Confirmation | None = None, limiters: EndpointLimiters | None = None) -> Runner:
    """A runner whose provider the stack closes (with `batch_dir`: through the provider's batch API,
    its journal in that run directory). `confirm`: a live runner sends one request first while the
    server has not confirmed a model it does not list. `limiters`: the endpoint's limiter is shared
    with the other runs using them."""
    provider = create_provider(spec, env, timeout_s=cfg.request_timeout, max_response_bytes=int(cfg.max_response_mb * 2**20))
    stack.push_async_callback(provider.close)
    if batch_dir is not None:
        return (await batch_runner(stack, provider, env, cfg, cache, pipeline, batch_dir, fingerprints=fingerprints,
                                   gate=gate, price=price, budget_left=budget_left))[0]
    if getattr(cache, "limits", None) is not None:  # a shared cache shares the limits itself, across processes
        limiters = None
    limiter = limiters.get(spec) if limiters is not None else None
    if limiter is None:
        limiter = _limiter(stack, spec, env, cfg, cache)
        if limiters is not None:
            limiters.put(spec, limiter)
    policy = RetryPolicy(max_attempts=cfg.max_attempts, timeout_s=cfg.request_timeout, max_retry_after_s=cfg.max_retry_after,
                         capacity_initial_s=min(RetryPolicy.capacity_initial_s, cfg.tier_wait / 32),
                         capacity_max_s=min(RetryPolicy.capacity_max_s, cfg.tier_wait / 4),
                         capacity_wait_s=cfg.tier_wait)  # a tier's capacity back-off: within --tier-wait (ask.capacity)
    runner = Runner(provider, limiter=limiter, cache=cache, pipeline=pipeline, policy=policy,
                    fingerprints=fingerprints, gate=gate, confirm=confirm)
    runner.service_tier = cfg.service_tier  # sent beside each request, never in its key (core/tiers.py)
    runner.tier_fallback = cfg.tier_fallback  # a tier without capacity after --tier-wait: sent at standard
    if confirm is not None and cfg.service_tier not in (None, STANDARD):  # a model without the tier: 1 request
        confirm.require_tier(cfg.service_tier)
    runner.hold_images(cfg.concurrency + PREPARED_AHEAD)
    make_claims = getattr(cache, "claims", None)
    if make_claims is not None:  # a claim outlives one request with its retries' waits, not a dead process
        runner.claims = make_claims(claim_ttl_s(cfg))
        stack.callback(runner.claims.close)
    return runner


def _limiter(stack: contextlib.AsyncExitStack, spec: ProviderSpec, env: Mapping[str, str], cfg: RunConfig,
             cache: CacheLike) -> Limiter:
    """The endpoint's limiter: --concurrency, --rpm, --tpm (learned below them), shared through a shared cache."""
    limiter = Limiter(concurrency=cfg.concurrency, rpm=cfg.rpm, tpm=cfg.tpm)
    if cfg.adaptive:
        limiter.adapt_rates()
    make_limits = getattr(cache, "limits", None)
    if make_limits is not None:  # a shared cache: the key's limits are shared by every process using it
        key = None
        with contextlib.suppress(EvalkitError):
            key = api_key_for(spec, env)
        limiter.shared = make_limits(scope_of(key, spec.provider, spec.endpoint, spec.model),
                                     cfg.concurrency if key else None, cfg.request_timeout + 5.0, owner_token())
        if limiter.shared is not None:
            stack.push_async_callback(limiter.shared.close)
    return limiter


PREPARED_AHEAD = 4  # queries that may hold prepared images beyond those in flight: the next to send


def claim_ttl_s(cfg: RunConfig) -> float:
    """How long a claim on a request key stands: one request's timeout and its Retry-After waits, with room."""
    tier_waits = cfg.tier_wait if cfg.service_tier not in (None, STANDARD) else 0.0  # a tier's capacity waits
    return 2 * cfg.request_timeout + cfg.max_retry_after + tier_waits + 30.0
