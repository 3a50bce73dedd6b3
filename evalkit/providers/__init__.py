"""Model specs (`provider/model`), keys and clients, from the providers' records (providers.registry).

Keys are read here, once, from the providers' usual environment variables, and go
straight into the client: they never enter the spec, the config, the cache key or a record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import load_target
from evalkit.providers.base import Provider, ProviderSpec
from evalkit.providers.batch_api import BatchAPI
from evalkit.providers.openai.service import service_hint, service_key, service_spec
from evalkit.providers.registry import RECORDS, batch_providers, find, info
from evalkit.providers.wire.url_rules import check_one_authorization


def parse_spec(text: str, base_urls: Sequence[str] = (), env: Mapping[str, str] | None = None) -> ProviderSpec:
    """`vllm/Qwen/Qwen2.5-VL-7B` -> provider "vllm", model "Qwen/Qwen2.5-VL-7B", with its base URLs; without
    --base-url, `openai-compatible/together/M` with TOGETHER_BASE_URL set -> model "M" of the service
    `together` at that URL (providers/openai/service.py)."""
    env = env if env is not None else {}
    provider, sep, model = (text or "").partition("/")
    if not sep or not provider or not model or model.strip() != model:
        raise EvalkitError(f"malformed --model '{text}': expected PROVIDER/MODEL, e.g. openai/gpt-4o or vllm/my-model")
    record = find(provider)
    if record is None:
        raise EvalkitError(f"unknown provider '{provider}' in --model '{text}' (known: {', '.join(RECORDS)})")
    urls = tuple(u for u in base_urls if u)
    if not urls and record.services:  # PROVIDER/SERVICE/MODEL with <SERVICE>_BASE_URL set (else 0.3's reading)
        service = service_spec(provider, model, env, record.base_url_env)
        if service is not None:
            return service
    if not urls:
        env_url = env.get(record.base_url_env)
        if env_url:
            urls = tuple(env_url.replace(",", " ").split())
        elif record.default_url is None:
            hint = service_hint(model) if record.services else ""
            raise EvalkitError(f"--model '{text}' needs --base-url (or {record.base_url_env}{hint})")
        elif record.default_in_endpoint:
            urls = (record.default_url,)
    if record.locate is not None:  # where the model runs enters the spec (Vertex AI's project and location)
        urls = load_target(record.locate)(urls, env, text)  # type: ignore[assignment]
    return ProviderSpec(provider, model, urls)


def api_key_for(spec: ProviderSpec, env: Mapping[str, str], flag: str = "--model") -> str | None:
    """The key for a provider (its record's variables, first set wins), or a one-line error when a
    required key is missing, or when it and URL credentials would share one header (naming the flag
    that asked for it: --model, or --judge)."""
    if spec.service is not None:  # openai-compatible/<service>/<model>: the service's own key, required
        return service_key(spec, env, flag)
    record = info(spec.provider)
    key = next((env[var] for var in record.key_env if env.get(var)), None)
    if key is None and record.key_required:
        first, *others = record.key_env
        either = f" (or {' or '.join(others)})" if others else ""
        raise EvalkitError(f"{first}{either} is not set (needed for {flag} {spec.label})")
    check_one_authorization(spec, key, flag)
    return key


def create_provider(spec: ProviderSpec, env: Mapping[str, str], *, timeout_s: float = 120.0,
                    max_response_bytes: int = 32 * 1024 * 1024) -> Provider:
    key = api_key_for(spec, env)
    make = load_target(info(spec.provider).client)
    return make(spec, api_key=key, env=env, timeout_s=timeout_s, max_response_bytes=max_response_bytes)  # type: ignore[return-value]


def has_batch_api(spec: ProviderSpec) -> bool:
    """The spec's provider sells a batch API (its record's batch facts; read on use, not kept)."""
    record = find(spec.provider)
    return record is not None and record.batch is not None


def check_batch(spec: ProviderSpec, flag: str = "--model") -> None:
    """`--batch` needs a provider that sells a batch API: a one-line error before anything is written."""
    if not has_batch_api(spec):
        raise EvalkitError(f"--batch: {spec.provider}/ has no batch API ({flag} {spec.label}); "
                           f"batches are for {', '.join(p + '/' for p in batch_providers())} — run without --batch")


def create_batch_api(live: Provider, env: Mapping[str, str], *, timeout_s: float = 300.0) -> BatchAPI:
    """The batch side of a live provider (same model, key and endpoint)."""
    spec = live.spec
    check_batch(spec)
    key = api_key_for(spec, env) or ""
    make = load_target(info(spec.provider).batch_client or "")
    return make(live, api_key=key, timeout_s=timeout_s)  # type: ignore[return-value]


async def resolve_auto(spec: ProviderSpec, env: Mapping[str, str]) -> ProviderSpec:
    """`vllm/auto`: the one model the server lists at /v1/models."""
    if spec.model != "auto" or not info(spec.provider).asks_unlisted:  # the self-hosted servers
        return spec
    from evalkit.providers.openai.compat import served_models

    names = await served_models(spec.base_urls[0], api_key_for(spec, env))
    if len(names) != 1:
        raise EvalkitError(f"{spec.label}: {spec.base_urls[0]} serves {len(names)} models "
                           f"({', '.join(names) or 'none'}); name one with --model "
                           f"{spec.provider}/{spec.service + '/' if spec.service else ''}NAME")
    return replace(spec, model=names[0])
