"""The endpoints a run talks to: the model's and the judge's specs, checked before any work starts.

Apart from wiring.py (the cache and runners), so resolving a run does not import the client side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from evalkit.core.errors import EvalkitError
from evalkit.core.settings import RunConfig
from evalkit.providers import ProviderSpec, api_key_for, check_batch, parse_spec, resolve_auto
from evalkit.providers.api_route import api_setting, default_timeout, route_for
from evalkit.providers.image_setting import check_image_setting
from evalkit.providers.preflight import check_setup
from evalkit.providers.reasoning import check_reasoning
from evalkit.providers.registry import RECORDS, info
from evalkit.providers.structured import check_structured
from evalkit.providers.tiers import check_tier


async def specs_for(cfg: RunConfig, env: Mapping[str, str]) -> tuple[ProviderSpec, ProviderSpec | None]:
    """The model's and the judge's specs; a reasoning switch, an image resolution setting or a service tier the
    model's record refuses and missing keys are errors before any work starts (but a dry run, which sends
    nothing, needs no key)."""
    check_reasoning(cfg.model, cfg.reasoning_effort, cfg.thinking_budget)
    check_image_setting(cfg.model, cfg.detail, cfg.media_resolution)
    check_structured(cfg.model, cfg.structured, cfg.reasoning_effort, cfg.thinking_budget, cfg.extra)
    spec = parse_spec(cfg.model, cfg.base_url, env)
    if cfg.provider_routing is not None and not info(spec.provider).routes_vendors:
        raise EvalkitError(f"--provider-routing is for openrouter/ models, not --model {spec.label}")
    if cfg.cache_tag:
        spec = replace(spec, cache_tag=cfg.cache_tag)
    check_setup(spec, sdk=not cfg.dry_run)
    if cfg.batch:
        check_batch(spec)
    check_tier(spec.provider, info(spec.provider).tiers, cfg.service_tier)  # a tier it does not sell: exit 2
    route_for(spec.provider, spec.model, cfg.api)  # --api responses where it is not served: exit 2
    judge_urls = tuple(cfg.judge_base_url.replace(",", " ").split()) if cfg.judge_base_url else ()
    judge_spec = parse_spec(cfg.judge, judge_urls, env) if cfg.judge else None
    if cfg.api_version and not any(info(s.provider).takes_api_version for s in (spec, judge_spec) if s):
        takers = ", ".join(f"{r.name}/" for r in RECORDS.values() if r.takes_api_version)
        raise EvalkitError(f"--api-version is for {takers} models, not --model {spec.label}")
    if judge_spec:
        check_setup(judge_spec, "--judge", sdk=not cfg.dry_run)
    if not cfg.dry_run:
        api_key_for(spec, env)
        if judge_spec:
            api_key_for(judge_spec, env, flag="--judge")
    return await resolve_auto(spec, env), judge_spec


def routed(cfg: RunConfig, spec: ProviderSpec) -> RunConfig:
    """The settings with the model's route (issue 47): `api` "responses" when its requests go to the Responses
    API (asked, or the model exists only there), else None, so a chat run is the run it always was; a
    Responses-only model without --timeout waits as long as its record says."""
    api = api_setting(spec.provider, spec.model, cfg.api)
    longer = default_timeout(spec.provider, spec.model, api) if cfg.timeout is None else None
    if api == cfg.api and longer is None:
        return cfg
    return replace(cfg, api=api, **({"timeout": longer} if longer is not None else {}))
