"""Preflight: before a run pays for anything, check it can be answered at all.

0.1.0 met a dead server with a minute of silent retries and then a table of zeros. Now:

- `check_setup` (no network, before anything is written): the provider's SDK is installed, and
  every base URL is an http(s) URL without a query string (url_rules). A one-line error naming the
  fix, exit 2.
- `probe_all` (only once a query must really be sent: a fully cached re-run stays offline): one
  free metadata call per endpoint — `GET …/v1/models` on chat-completions servers, the model
  lookup `GET /v1/models/{model}` on Anthropic, `GET /v1beta/models/{model}` on Gemini — never a
  generation. A refused connection, DNS or TLS failure, timeout, 401/403 or an unknown model on
  every replica is one line naming the URL and the cause, exit 2; with replicas, those that fail
  are named and the run goes on with the rest. Other statuses (a 5xx, a 429, a server without a
  model list) are left to the runner's retries.

A model the list does not name is unknown only where the server is known to refuse other names:
vLLM, which says `owned_by: vllm` on every entry of its list (its ModelCard's default; vLLM answers
any other name with 404 "The model `X` does not exist."), and the OpenAI API itself. Most other
OpenAI-compatible servers list one alias and answer any name (llama.cpp's server, TGI's Messages
API, Ollama's tag aliases such as `llava` for `llava:latest`, LiteLLM's wildcard routes): for
`openai-compatible/` and `vllm/` specs the probe marks the model `unlisted`, the run says so in one
line and asks anyway, and its first request confirms the model before the others go
(evalkit.ask.confirm).

Azure's metadata call (`GET /openai/models?api-version=…`, or `/openai/v1/models`) lists base models,
never deployments: it checks the endpoint and the key only (a run on a Microsoft Entra ID token, which the
probe does not carry, checks reachability only). OpenRouter's is its key check (`GET /api/v1/key`, read
2026-11-26): a refused key, or a key whose credit limit is spent, is exit 2 before anything is sent.
Bedrock's runtime has no free metadata call (listing models is the control plane's, under another
permission): a `bedrock/` model is not probed, and its first request confirms it, alone (a model the
account cannot use, an unknown id or refused credentials stop the run there, exit 2).

The probe also learns whether the endpoint is evalkit's simulated server (its model list says
`owned_by: evalkit-sim`), so the run can read the simulator's mismatch counter at the end.
Wire formats read on 2026-11-23: OpenAI and vLLM `GET /v1/models`; Anthropic "Get a Model"
(`GET /v1/models/{model_id}`, headers `x-api-key`, `anthropic-version`); Gemini `models.get`
(`GET /v1beta/models/{model}`, header `x-goog-api-key`). vLLM's `owned_by: "vllm"` and its 404 for
an unknown name read on 2026-11-26 in vllm-project/vllm (vllm/entrypoints/openai/engine/protocol.py
ModelCard, models/serving.py check_model).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import quote, urlsplit

from evalkit.core.errors import EvalkitError
from evalkit.providers.base import ProviderSpec, azure_endpoint, canonical_url, public_url
from evalkit.providers.registry import info
from evalkit.providers.wire.connect import BODY_BYTES, get_metadata
from evalkit.providers.wire.redact import Redactor, url_credentials
from evalkit.providers.wire.url_rules import check_no_query

ANTHROPIC_VERSION = "2023-06-01"
SIM_OWNER = "evalkit-sim"
VLLM_OWNER = "vllm"  # what vLLM's model list says in owned_by: a server that refuses names it does not list
PROBE_TIMEOUT_S = 10.0


def check_setup(spec: ProviderSpec, flag: str = "--model", *, sdk: bool = True) -> None:
    """Every base URL is http(s), and (with `sdk`) the SDK the provider needs is installed: else
    EvalkitError. A dry run checks the URLs only: it computes request keys without a client."""
    module, extra = info(spec.provider).sdk or (None, None)
    if sdk and module is not None and not _installed(module):
        raise EvalkitError(f"{flag} {spec.label} needs the {spec.provider} SDK, which is not installed: "
                           f"pip install 'evalkit[{extra}]'")
    check_no_query(spec, flag)  # first: the messages below repeat the URL
    for url in spec.base_urls:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a port that is not a number in range
        except ValueError as e:  # "http://[::1": Invalid IPv6 URL
            raise EvalkitError(f"{flag} {spec.label}: base URL '{public_url(url)}' is not a valid URL ({e}; "
                               "e.g. http://127.0.0.1:8000/v1)") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EvalkitError(f"{flag} {spec.label}: base URL '{public_url(url)}' is not an http(s) URL "
                               "(e.g. http://127.0.0.1:8000/v1)")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        return False


@dataclass(frozen=True)
class Probe:
    """What one endpoint said to its metadata call."""

    url: str  # the base URL, without credentials
    cause: str | None  # None: it answers and serves the model
    simulator: bool = False
    models: tuple[str, ...] = ()  # what a chat-completions server lists at /v1/models (provenance)
    version: str | None = None  # what the record's version call said (vLLM's /version; provenance)
    unlisted: bool = False  # it answers, but does not list the model (or its list was an error, `doubtful`):
    #                         asked anyway, the first request confirms it
    refused: bool = False  # the cause is the credentials (vertex/: refused by the token endpoint, 401, 403)

    @property
    def ok(self) -> bool:
        return self.cause is None


@dataclass(frozen=True)
class Reachable:
    """The outcome of probing one spec: its replicas that answer, and notes on those that do not."""

    spec: ProviderSpec
    probes: tuple[Probe, ...]

    @property
    def simulator_urls(self) -> tuple[str, ...]:
        return tuple(p.url for p in self.probes if p.ok and p.simulator)

    def notes(self) -> list[str]:
        return [f"{self.spec.label}: replica {p.url} does not answer ({p.cause}); the run goes on without it"
                for p in self.probes if not p.ok]

    def unlisted(self) -> tuple[str, ...] | None:
        """What the servers list, when one that answers does not list the model (else None)."""
        if not any(p.ok and p.unlisted for p in self.probes):
            return None
        return tuple(dict.fromkeys(m for p in self.probes if p.ok for m in p.models))


def _request(spec: ProviderSpec, base: str, key: str | None, env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The metadata call for one base URL: (url, headers)."""
    record = info(spec.provider)
    wire = record.wire
    if wire == "azure-openai":  # base models, not deployments: it checks the endpoint and the key only
        version = env.get("OPENAI_API_VERSION")
        route = f"/openai/models?api-version={quote(version, safe='')}" if version else "/openai/v1/models"
        return azure_endpoint(public_url(base)) + route, ({"api-key": key} if key else {})
    if record.key_check:
        return canonical_url(spec.provider, base) + record.key_check, ({"Authorization": f"Bearer {key}"} if key else {})
    if wire == "messages":
        headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}
        return f"{base.rstrip('/')}/v1/models/{spec.model}", headers
    if wire == "gemini":
        return f"{base.rstrip('/')}/v1beta/models/{spec.model}", ({"x-goog-api-key": key} if key else {})
    return canonical_url(spec.provider, base) + "/models", ({"Authorization": f"Bearer {key}"} if key else {})


class Listing(NamedTuple):
    """What a /v1/models body says."""

    ids: list[str]
    simulator: bool  # evalkit's simulated server
    any_name: bool  # the simulator says it serves any name
    vllm: bool  # vLLM, which refuses a name it does not list


def _listed(body: object) -> Listing:
    data = body.get("data") if isinstance(body, dict) else None
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    ids = [m["id"] for m in entries if isinstance(m.get("id"), str)]
    sim_info = body.get("evalkit_sim") if isinstance(body, dict) else None
    simulator = isinstance(sim_info, dict) or any(m.get("owned_by") == SIM_OWNER for m in entries)
    any_name = isinstance(sim_info, dict) and sim_info.get("strict_model") is False
    vllm = bool(entries) and all(m.get("owned_by") == VLLM_OWNER for m in entries)
    return Listing(ids, simulator, any_name, vllm)


def asked_anyway(spec: ProviderSpec, status: int, body: object) -> bool:
    """The model list does not name the model, but the server may answer it all the same (not vLLM, and
    not the OpenAI API): the run asks, and its first request confirms it. Pure."""
    if status != 200 or not info(spec.provider).asks_unlisted:
        return False
    listing = _listed(body)
    return bool(listing.ids) and spec.model not in listing.ids and not listing.any_name and not listing.vllm


def doubtful(status: int) -> bool:
    """The metadata call was answered with an error that does not stop the run (a 400, a 5xx; not a 404, a
    route the server does not have): the run's first request goes alone and confirms the model, so an error
    every request would get alike (LiteLLM's 400 "No connected db.") is not sent for every query. Pure."""
    return status >= 400 and status != 404


def _names_the_model(body: object, model: str) -> bool:
    """A 404 that is the API's own "no such model" (a JSON error naming it), not a path nobody serves."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return isinstance(message, str) and model in message


def judge_reply(spec: ProviderSpec, status: int, body: object, keyed: bool = True) -> tuple[str | None, bool]:
    """(cause or None, is the simulator) from the metadata call's status and JSON body. Pure. `keyed`: the
    call carried the run's credential (an Azure run on a Microsoft Entra ID token probes reachability only)."""
    record = info(spec.provider)
    if status in (401, 403):
        return (f"HTTP {status}: the API key was refused", False) if keyed else (None, False)
    if record.key_check:
        return _credit_left(status, body), False
    wire = record.wire
    if wire == "azure-openai":
        return None, False  # never compare the deployment with Azure's list of base models
    if wire != "chat-completions":  # a model lookup, not a list
        simulator = isinstance(body, dict) and body.get("owned_by") == SIM_OWNER
        if status == 404 and _names_the_model(body, spec.model):  # else a proxy without the lookup: go on
            return f"HTTP 404: unknown model '{spec.model}'", False
        if status == 400 and wire == "gemini":  # Gemini answers a bad key with 400 INVALID_ARGUMENT
            message = body.get("error", {}).get("message") if isinstance(body, dict) else None
            return f"HTTP 400: {message if isinstance(message, str) else 'bad request'}", False
        return None, simulator
    if status != 200:
        return None, False  # no model list here (404), or a server error the runner's retries handle
    ids, simulator, any_name, _ = _listed(body)
    if ids and spec.model not in ids and not any_name and not asked_anyway(spec, status, body):
        return f"model '{spec.model}' is not served there (it serves: {', '.join(ids[:5])})", simulator
    return None, simulator


def _credit_left(status: int, body: object) -> str | None:
    """A key check's answer (OpenRouter `GET /key`, read 2026-11-26: `data.limit_remaining`, null when the key
    has no limit): a key with nothing left cannot pay for one answer. Pure."""
    if status == 402:
        return "HTTP 402: out of credits; add credits, then run the same command again"
    data = body.get("data") if isinstance(body, dict) else None
    left = data.get("limit_remaining") if isinstance(data, dict) else None
    if status == 200 and isinstance(left, int | float) and not isinstance(left, bool) and left <= 0:
        return f"the key's credit limit is spent ({left:g} left); raise it or add credits, then run again"
    return None


async def probe(spec: ProviderSpec, base: str, key: str | None, timeout_s: float = PROBE_TIMEOUT_S,
                env: Mapping[str, str] | None = None) -> Probe:
    """One endpoint's metadata call; every failure becomes a cause (never an exception)."""
    if info(spec.provider).wire == "vertex-ai":  # a token first, then the model's lookup (vertex_preflight)
        from evalkit.providers.vertex.preflight import probe_vertex

        found = await probe_vertex(spec, base, env or {}, timeout_s)
        return Probe(public_url(base), found.cause, isinstance(found.body, dict) and found.body.get("owned_by") == SIM_OWNER,
                     unlisted=found.cause is None,  # the lookup does not say the project may use it: the first request does
                     refused=found.refused)
    from evalkit.providers.openai.compat import proxy_for

    url, headers = _request(spec, base, key, env or {})
    redact = Redactor([key, *url_credentials(base)])
    shown = public_url(base)
    failed, status, body = await get_metadata(url, headers, timeout_s, proxy_for(url), redact)
    if failed is not None:
        return Probe(shown, failed)
    cause, simulator = judge_reply(spec, status, body, keyed=bool(key) or info(spec.provider).wire != "azure-openai")
    listing = info(spec.provider).wire == "chat-completions" and not info(spec.provider).key_check
    models = tuple(_listed(body).ids) if status == 200 and listing else ()
    path = info(spec.provider).version_path
    version = await _server_version(base, path, headers, timeout_s) if path and cause is None else None
    unlisted = cause is None and (asked_anyway(spec, status, body) or doubtful(status))
    return Probe(shown, redact(cause) if cause else None, simulator, models, version, unlisted)


async def _server_version(base: str, path: str, headers: dict[str, str], timeout_s: float) -> str | None:
    """The record's version call at the server's root (vLLM's `GET /version`): which server answered, for
    the run's manifest."""
    import aiohttp

    root = base.rstrip("/").removesuffix("/v1")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session, \
                session.get(root + path, headers=headers, allow_redirects=False) as resp:
            body = json.loads((await resp.content.read(BODY_BYTES)).decode("utf-8")) if resp.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError, ValueError):
        return None
    version = body.get("version") if isinstance(body, dict) else None
    return str(version)[:60] if isinstance(version, str | int | float) else None


async def probe_all(spec: ProviderSpec, key: str | None, flag: str = "--model",
                    env: Mapping[str, str] | None = None) -> Reachable:
    """Probe every replica at once; EvalkitError when none answers."""
    bases: Sequence[str] = spec.base_urls or (info(spec.provider).default_url or "",)
    if info(spec.provider).wire == "bedrock-runtime":  # no free metadata call: the first request confirms the model
        return Reachable(spec, tuple(Probe(public_url(b), None, unlisted=True) for b in bases))
    probes = tuple(await asyncio.gather(*(probe(spec, b, key, env=env) for b in bases)))
    if not any(p.ok for p in probes):
        detail = "; ".join(f"{p.url}: {p.cause}" for p in probes)
        if all(p.refused for p in probes):  # it answered: the credentials are what the user must change
            raise EvalkitError(f"{flag} {spec.label}: the credentials were refused: {detail}")
        raise EvalkitError(f"{flag} {spec.label} cannot be reached: {detail}")
    return Reachable(spec, probes)


async def sim_unkeyed(url: str) -> int | None:
    """How many requests the simulated server at base URL `url` could not find in its answer key
    (GET /sim/counters), or None if it does not say."""
    import aiohttp

    parts = urlsplit(url)
    counters = f"{parts.scheme}://{parts.netloc}/sim/counters"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session, \
                session.get(counters, allow_redirects=False) as resp:
            body = json.loads((await resp.content.read(BODY_BYTES)).decode("utf-8"))
    except (aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError, ValueError):
        return None
    value = body.get("unkeyed") if isinstance(body, dict) else None
    return value if isinstance(value, int) else None

