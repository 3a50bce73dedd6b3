"""Model specs (`provider/model`) and the provider registry.

Keys are read here, once, from the providers' usual environment variables, and go
straight into the client: they never enter the spec, the config, the cache key or a record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from evalkit.core.errors import EvalkitError
from evalkit.providers.base import Provider, ProviderSpec
from evalkit.providers.batch_api import BatchAPI

PROVIDERS = {
    "openai": "OpenAI API chat completions (OPENAI_API_KEY; OPENAI_BASE_URL, OPENAI_ORG_ID, OPENAI_PROJECT_ID optional)",
    "vllm": "a vLLM server's OpenAI-compatible API (--base-url or VLLM_BASE_URL; VLLM_API_KEY optional)",
    "openai-compatible": "any OpenAI-compatible server: SGLang, llama.cpp, ... (--base-url or OPENAI_BASE_URL)",
    "anthropic": "Anthropic Messages API through the official SDK (ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL optional)",
    "google": "Google Gemini API through google-genai (GEMINI_API_KEY or GOOGLE_API_KEY; GEMINI_BASE_URL optional)",
}
_AVAILABLE = ("openai", "vllm", "openai-compatible", "anthropic", "google")
DEFAULT_VLLM_URL = "http://localhost:8000/v1"
_BASE_URL_VARS = {"openai": "OPENAI_BASE_URL", "vllm": "VLLM_BASE_URL", "openai-compatible": "OPENAI_BASE_URL",
                  "anthropic": "ANTHROPIC_BASE_URL", "google": "GEMINI_BASE_URL"}


def parse_spec(text: str, base_urls: Sequence[str] = (), env: Mapping[str, str] | None = None) -> ProviderSpec:
    """`vllm/Qwen/Qwen2.5-VL-7B` -> provider "vllm", model "Qwen/Qwen2.5-VL-7B", with its base URLs."""
    env = env if env is not None else {}
    provider, sep, model = (text or "").partition("/")
    if not sep or not provider or not model or model.strip() != model:
        raise EvalkitError(f"malformed --model '{text}': expected PROVIDER/MODEL, e.g. openai/gpt-4o or vllm/my-model")
    if provider not in PROVIDERS:
        raise EvalkitError(f"unknown provider '{provider}' in --model '{text}' (known: {', '.join(PROVIDERS)})")
    if provider not in _AVAILABLE:
        raise EvalkitError(f"provider '{provider}' is not available in this version of evalkit (available: "
                           f"{', '.join(_AVAILABLE)})")
    urls = tuple(u for u in base_urls if u)
    if not urls:
        env_url = env.get(_BASE_URL_VARS[provider])
        if env_url:
            urls = tuple(env_url.replace(",", " ").split())
        elif provider == "vllm":
            urls = (DEFAULT_VLLM_URL,)
        elif provider == "openai-compatible":
            raise EvalkitError(f"--model '{text}' needs --base-url (or OPENAI_BASE_URL)")
    return ProviderSpec(provider, model, urls)


def api_key_for(spec: ProviderSpec, env: Mapping[str, str], flag: str = "--model") -> str | None:
    """The key for a provider, or a one-line error when a required key is missing (naming the flag
    that asked for it: --model, or --judge)."""
    if spec.provider == "openai":
        key = env.get("OPENAI_API_KEY")
        if not key:
            raise EvalkitError(f"OPENAI_API_KEY is not set (needed for {flag} {spec.label})")
        return key
    if spec.provider == "anthropic":
        key = env.get("ANTHROPIC_API_KEY")
        if not key:
            raise EvalkitError(f"ANTHROPIC_API_KEY is not set (needed for {flag} {spec.label})")
        return key
    if spec.provider == "google":
        key = env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")
        if not key:
            raise EvalkitError(f"GEMINI_API_KEY (or GOOGLE_API_KEY) is not set (needed for {flag} {spec.label})")
        return key
    if spec.provider == "vllm":
        return env.get("VLLM_API_KEY") or None
    return env.get("OPENAI_API_KEY") or None


def create_provider(spec: ProviderSpec, env: Mapping[str, str], *, timeout_s: float = 120.0,
                    max_response_bytes: int = 32 * 1024 * 1024) -> Provider:
    key = api_key_for(spec, env)
    limits = {"timeout_s": timeout_s, "max_response_bytes": max_response_bytes}
    if spec.provider == "openai":
        from evalkit.providers.openai_api import openai_provider

        return openai_provider(spec, api_key=key or "", env=env, **limits)
    if spec.provider == "anthropic":
        from evalkit.providers.anthropic import AnthropicProvider

        return AnthropicProvider(spec, api_key=key or "", **limits)
    if spec.provider == "google":
        from evalkit.providers.google import GoogleProvider

        return GoogleProvider(spec, api_key=key or "", **limits)
    from evalkit.providers.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(spec, api_key=key, **limits)


BATCH_PROVIDERS = ("openai", "anthropic", "google")


def check_batch(spec: ProviderSpec, flag: str = "--model") -> None:
    """`--batch` needs a provider that sells a batch API: a one-line error before anything is written."""
    if spec.provider not in BATCH_PROVIDERS:
        raise EvalkitError(f"--batch: {spec.provider}/ has no batch API ({flag} {spec.label}); "
                           f"batches are for {', '.join(p + '/' for p in BATCH_PROVIDERS)} — run without --batch")


def create_batch_api(live: Provider, env: Mapping[str, str], *, timeout_s: float = 300.0) -> BatchAPI:
    """The batch side of a live provider (same model, key and endpoint)."""
    spec = live.spec
    check_batch(spec)
    key = api_key_for(spec, env) or ""
    if spec.provider == "openai":
        from evalkit.providers.batch_openai import OpenAIBatches

        return OpenAIBatches(live, api_key=key, timeout_s=timeout_s)  # type: ignore[arg-type]
    if spec.provider == "anthropic":
        from evalkit.providers.batch_anthropic import AnthropicBatches

        return AnthropicBatches(live, api_key=key, timeout_s=timeout_s)  # type: ignore[arg-type]
    from evalkit.providers.batch_google import GoogleBatches

    return GoogleBatches(live)  # type: ignore[arg-type]


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
