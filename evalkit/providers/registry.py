"""One record per provider: every fact evalkit keeps about a provider, in one place (issue 30, item 1).

Adding a provider is three things: its unit (a folder, evalkit/providers/<family>/, or one module, holding
its client, batch and edit adapters), its record here (RECORDS), and a simulator dialect (evalkit/sim) so
its tests run without the network. Nothing else keys on provider names (issue 43, item 3): parsing
`--model`, keys, base URLs, the SDK check, the preflight's metadata call and server version, image
limits, batch support and limits, seedless batches, the reasoning switches taken and refused,
image-token estimates, price-table keys, an export's developer and platform, `--api-version` and
`evalkit list` all read the record. tests/test_provider_records.py fails, naming the provider and the
field, for a record that leaves a required field empty; tests/test_provider_unit.py fails on a rule
outside the registry and a provider's unit that tests a provider's name.

Light on import: no SDK, no aiohttp; clients are named as "module:attribute" and imported on use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Literal, get_args

from evalkit.core.errors import EvalkitError
from evalkit.images.provider_limits import (
    ANTHROPIC_IMAGES,
    AZURE_IMAGES,
    BEDROCK_IMAGES,
    COMPAT_IMAGES,
    GOOGLE_IMAGES,
    OPENAI_IMAGES,
    ROUTED_IMAGES,
    VERTEX_IMAGES,
    VLLM_IMAGES,
    ImageLimits,
)
from evalkit.images.token_formulas import ImageTokens
from evalkit.images.token_formulas import anthropic_image_tokens as anthropic_image_tokens
from evalkit.images.token_formulas import gemini_image_tokens as gemini_image_tokens
from evalkit.images.token_formulas import openai_image_tokens as openai_image_tokens
from evalkit.providers.batch_api import BatchLimits
from evalkit.providers.record_parts import (
    ANTHROPIC_MIN_BUDGET,
    NO_BUDGET_SWITCHES,
    OPENAI_REASONING,
    TEMPLATE_REASONING,
    Reasoning,
    Switch,
    bedrock_vendor,
    vertex_vendor,
)
from evalkit.providers.tiers import (
    AZURE_TIERS,
    BEDROCK_TIERS,
    GEMINI_TIERS,
    OPENAI_TIERS,
    OPENROUTER_TIERS,
    PASSED_TIERS,
    VERTEX_TIERS,
    ServiceTiers,
)

# The API shape, named for the API and never for a provider (a rule reading it is not keyed on a name):
# "azure-openai" is chat completions on Azure's routes, "messages" Anthropic's Messages API, "gemini"
# generateContent, "vertex-ai" either of the last two on Vertex AI, "bedrock-runtime" Bedrock's invoke/Converse.
Wire = Literal["chat-completions", "azure-openai", "messages", "gemini", "vertex-ai", "bedrock-runtime"]
# The image resolution setting a provider's requests carry (issue 45, item 2; providers/image_setting.py): "detail"
# each `image_url` part's detail (chat completions), "media_resolution" generationConfig.mediaResolution (Gemini).
ImageSetting = Literal["detail", "media_resolution"]
IMAGE_SETTING_FLAGS: dict[str, str] = {"detail": "--detail", "media_resolution": "--media-resolution"}
RATE_DIALECTS = ("openai", "anthropic", "openrouter", "none")  # as evalkit.providers.wire.rate_headers reads them (and the simulator speaks)




# ---------------------------------------------------------------- the record

@dataclass(frozen=True)
class ProviderInfo:
    """Everything evalkit knows about one provider. Fields marked optional may be None/False/();
    every other field must be non-empty (tests/test_provider_records.py)."""

    name: str  # the PROVIDER of --model PROVIDER/MODEL
    description: str  # its line in `evalkit list` (names its key and base-URL variables)
    client: str  # "module:callable" building the live client: f(spec, *, api_key, env, timeout_s, max_response_bytes)
    wire: Wire  # the API shape: chat-completions URLs get /v1 (canonical_url); which metadata call the preflight makes
    key_env: tuple[str, ...]  # environment variables holding the key, first set wins
    base_url_env: str  # environment variable holding the base URL(s), when --base-url is not given
    image_limits: ImageLimits  # what it accepts as an image (evalkit.images.provider_limits)
    rate_headers: str  # rate-limit header dialect its replies carry (RATE_DIALECTS)
    reasoning: Reasoning  # what --reasoning-effort / --thinking-budget become, and which it refuses
    image_tokens: ImageTokens  # its image-token formula, by model family and resolution (images/token_formulas.py):
    #                            dry-run estimates, --max-cost reservations, batch sizing
    price_key: str  # the key of its models in the price table (money/pricing.py, --prices files)
    key_required: bool = True  # optional: a missing key is a one-line error before anything runs
    default_url: str | None = None  # optional: where the API is without --base-url; None: --base-url is required
    default_in_endpoint: bool = False  # optional: the default URL enters the spec (and the cache key's endpoint);
    #                                    False: the endpoint stays empty and the client's own default is used
    sdk: tuple[str, str] | None = None  # optional: (module, pip extra) of the SDK its client needs
    asks_unlisted: bool = False  # optional: a model its /v1/models does not list is asked anyway (lenient servers)
    reasoning_in_output: bool = True  # its output-token count already includes reasoning tokens
    batch: BatchLimits | None = None  # optional: its batch API's documented limits (None: no --batch)
    batch_client: str | None = None  # "module:class" of its batch adapter, f(live, *, api_key, timeout_s)
    batch_discount: float | None = None  # the batch price as a share of the live price
    seedless_batch: bool = False  # its batch lines carry no seed: --repeats in a batch are identical requests
    editor: str | None = None  # optional: "module:class" of its image editor, f(spec, *, api_key, timeout_s)
    reports_cost: bool = False  # its replies say what they cost: that is recorded as the cost (--max-cost works)
    key_check: str | None = None  # optional: the free call (after the base URL) the preflight makes instead of
    #                               listing models: it checks the key and says what credit is left (OpenRouter)
    routes_vendors: bool = False  # its models are VENDOR/MODEL served by that vendor: a known vendor's image
    #                               limits apply, and its prices estimate a dry run
    model_vendor: Callable[[str], str | None] | None = None  # optional: the known provider whose model a name is
    #                               (a cloud serving several vendors' models): its image limits and prices apply
    locate: str | None = None  # optional: "module:function" f(urls, env, label) -> the spec's base URLs,
    #                            naming where the model runs (Vertex AI's project and location)
    services: bool = False  # optional: PROVIDER/SERVICE/MODEL reaches an OpenAI-shaped service through SERVICE_BASE_URL
    #                         and SERVICE_API_KEY when no --base-url is given (providers/openai/service.py)
    developer: str | None = None  # optional: who develops the models it serves (an export's model developer);
    #                               None: many developers, named by the model's ORG/ or its model_vendor's record
    self_hosted: bool = False  # optional: a server the user runs (vLLM, SGLang, …): an export names it the
    #                            inference engine, with the version its preflight read, not an inference platform
    version_path: str | None = None  # optional: the free call, at the server's root, saying which version of
    #                                  the server answers (vLLM's /version), kept in the run's manifest
    takes_api_version: bool = False  # optional: --api-version applies to it (Azure's classic route)
    image_setting: ImageSetting | None = None  # optional: the resolution setting its requests carry (the flag:
    #                                            IMAGE_SETTING_FLAGS); None: it has none, and the flag is refused
    tiers: ServiceTiers | None = None  # optional: the service tiers it sells (--service-tier; providers/tiers.py)
    responses: bool = False  # optional: it serves OpenAI's Responses API (`--api responses`; issue 47)
    responses_only: str = ""  # optional: a pattern of the model names that exist only on Responses (sent there
    #                           by default; dated snapshots included); "": none
    responses_timeout: float | None = None  # optional: the default request timeout of those models, in seconds
    #                                         (they can think for minutes); --timeout wins
    json_output: str = ""  # optional: a pattern of the Claude model names that take Anthropic's structured outputs
    #                        (`output_config.format`): --structured sends that, not a forced tool; "": none

    def __post_init__(self) -> None:
        """The image limits it names carry its name, whoever's figures they are (a new OpenAI-shaped record
        reuses OpenAI's): their messages name the provider that was asked."""
        if self.image_limits and self.image_limits.name != self.name:
            object.__setattr__(self, "image_limits", replace(self.image_limits, name=self.name))

    @property
    def optional(self) -> frozenset[str]:
        return _OPTIONAL

    def missing(self) -> list[str]:
        """The required fields left empty, and batch facts given only in part."""
        empty = [f.name for f in fields(self) if f.name not in _OPTIONAL and getattr(self, f.name) in ("", (), None)]
        batch = (self.batch, self.batch_client, self.batch_discount)
        if any(x is not None for x in batch) and any(x is None for x in batch):
            empty += [n for n, x in zip(("batch", "batch_client", "batch_discount"), batch, strict=True) if x is None]
        if self.rate_headers and self.rate_headers not in RATE_DIALECTS:
            empty.append(f"rate_headers (not one of {', '.join(RATE_DIALECTS)})")
        if self.reasoning and self.reasoning.sends not in get_args(Switch):
            empty.append(f"reasoning.sends (not one of {', '.join(get_args(Switch))})")
        elif self.reasoning and self.reasoning.sends in NO_BUDGET_SWITCHES and self.reasoning.takes_budget():
            empty.append(f"reasoning.no_budget ({self.reasoning.sends} has no budget: say why one is refused)")
        return empty


_OPTIONAL = frozenset({"key_required", "default_url", "default_in_endpoint", "sdk", "asks_unlisted",
                       "reasoning_in_output", "batch", "batch_client", "batch_discount", "seedless_batch", "editor",
                       "reports_cost", "routes_vendors", "key_check", "model_vendor", "locate", "services",
                       "developer", "self_hosted", "version_path", "takes_api_version", "image_setting",
                       "tiers", "responses", "responses_only", "responses_timeout", "json_output"})


# Batch limits, read 2026-11-25. OpenAI: "up to 50,000 requests, and can be up to 200 MB in size" (Batch API
# reference, input_file_id). Anthropic: "limited to either 100,000 Message requests or 256 MB in size,
# whichever is reached first" (Message Batches guide). Gemini: inline requests "suitable for smaller
# batches that keep the total request size under 20MB" (Batch API guide); evalkit sends inline requests,
# and as that guide names no request count, at most 10,000 per batch (evalkit's choice).
# Batch discounts, read 2026-11-25: "50% of the standard cost" (ai.google.dev/gemini-api/docs/batch-api),
# "cutting costs by 50%" (platform.claude.com/docs/en/build-with-claude/batch-processing), "50% cost
# discount compared to synchronous APIs" (platform.openai.com/docs/guides/batch).
# Reasoning in output: OpenAI's completion_tokens includes completion_tokens_details.reasoning_tokens;
# Anthropic's output_tokens includes thinking blocks; Gemini's thoughts_token_count is billed as output but
# is not in candidates_token_count.
# The Responses API, read 2026-11-29: o3-pro is "only available in the /responses API ... Some complex requests
# may take a few minutes" (docs.aimlapi.com/api-references/text-models-llm/openai/o3-pro, after OpenAI's model
# page); o1-pro and gpt-5-pro likewise, their dated snapshots (o3-pro-2025-06-10) too. Such models may think for
# minutes: 900 s a request by default. An Azure deployment named after one of them is taken as one.
RESPONSES_ONLY = r"^(o1-pro|o3-pro|gpt-5-pro|gpt-5\.\d+-pro)(-\d{4}-\d{2}-\d{2})?$"
RESPONSES_TIMEOUT_S = 900.0
# Anthropic's structured outputs, read 2026-11-29 (platform.claude.com/docs/en/build-with-claude/structured-outputs):
# JSON outputs, `output_config.format: {type: json_schema, schema}`, no beta header, "generally available on the
# Claude API and Amazon Bedrock for Claude Opus 4.6, Claude Sonnet 4.6, Claude Sonnet 4.5, Claude Opus 4.5, and
# Claude Haiku 4.5", and Opus 4.7 (docs.cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/
# structured_outputs lists Opus 4.7, Sonnet 4.6 and Opus 4.6); AWS: "Claude models on Amazon Bedrock return
# schema-compliant JSON on both the bedrock-runtime and bedrock-mantle endpoints" (docs.aws.amazon.com/bedrock/
# latest/userguide/claude-messages-structured-outputs). Vertex AI keeps the feature "disabled by the organization
# policy constraint" until a project allows it, so vertex/ keeps the forced tool, which needs no policy.
_JSON_OUTPUT_CLAUDE = r"claude-(?:opus-4-[5-7]|sonnet-4-[56]|haiku-4-5)"
ANTHROPIC_JSON_OUTPUT = rf"^{_JSON_OUTPUT_CLAUDE}(?:-\d{{8}})?$"  # dated snapshots too
BEDROCK_JSON_OUTPUT = rf"^(?:[a-z]{{2,6}}\.)?anthropic\.{_JSON_OUTPUT_CLAUDE}(?:-\d{{8}})?(?:-v\d+(?::\d+)?)?$"
RECORDS: dict[str, ProviderInfo] = {r.name: r for r in (
    ProviderInfo(
        name="openai",
        description="OpenAI API chat completions (OPENAI_API_KEY; OPENAI_BASE_URL, OPENAI_ORG_ID, "
                    "OPENAI_PROJECT_ID optional)",
        client="evalkit.providers.openai.api:openai_provider", wire="chat-completions",
        key_env=("OPENAI_API_KEY",), base_url_env="OPENAI_BASE_URL", default_url="https://api.openai.com/v1",
        image_limits=OPENAI_IMAGES, rate_headers="openai",
        reasoning=replace(OPENAI_REASONING, always_on=r"^o\d"),  # o-series: the lowest effort is "low"
        image_tokens=openai_image_tokens, price_key="openai", developer="OpenAI",
        batch=BatchLimits(50_000, 200 * 1024 * 1024,
                          "platform.openai.com/docs/api-reference/batch/create (read 2026-11-25)"),
        batch_client="evalkit.providers.openai.batch:OpenAIBatches", batch_discount=0.5,
        editor="evalkit.providers.openai.edit:OpenAIImageEditor", image_setting="detail", tiers=OPENAI_TIERS,
        responses=True, responses_only=RESPONSES_ONLY, responses_timeout=RESPONSES_TIMEOUT_S),
    ProviderInfo(
        name="vllm",
        description="a vLLM server's OpenAI-compatible API (--base-url or VLLM_BASE_URL; VLLM_API_KEY optional)",
        client="evalkit.providers.openai.compat:compat_provider", wire="chat-completions",
        key_env=("VLLM_API_KEY",), key_required=False, base_url_env="VLLM_BASE_URL",
        default_url="http://localhost:8000/v1", default_in_endpoint=True, asks_unlisted=True,
        image_limits=VLLM_IMAGES, rate_headers="openai", reasoning=TEMPLATE_REASONING,
        image_tokens=openai_image_tokens, price_key="vllm", self_hosted=True, version_path="/version",
        image_setting="detail"),
    ProviderInfo(
        name="openai-compatible",
        description="any OpenAI-compatible server: SGLang, llama.cpp, ... (--base-url or OPENAI_BASE_URL; "
                    "OPENAI_API_KEY optional); a service: openai-compatible/SERVICE/MODEL with SERVICE_BASE_URL "
                    "and SERVICE_API_KEY",
        client="evalkit.providers.openai.compat:compat_provider", wire="chat-completions",
        key_env=("OPENAI_API_KEY",), key_required=False, base_url_env="OPENAI_BASE_URL", asks_unlisted=True,
        image_limits=COMPAT_IMAGES, rate_headers="openai", reasoning=TEMPLATE_REASONING,
        image_tokens=openai_image_tokens, price_key="openai-compatible", services=True, self_hosted=True,
        image_setting="detail", tiers=PASSED_TIERS, responses=True),
    ProviderInfo(
        name="anthropic",
        description="Anthropic Messages API through the official SDK (ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL optional)",
        client="evalkit.providers.anthropic.client:anthropic_provider", wire="messages",
        key_env=("ANTHROPIC_API_KEY",), base_url_env="ANTHROPIC_BASE_URL", default_url="https://api.anthropic.com",
        sdk=("anthropic", "anthropic"), image_limits=ANTHROPIC_IMAGES, rate_headers="anthropic",
        reasoning=Reasoning("thinking.budget_tokens", "budget", min_budget=ANTHROPIC_MIN_BUDGET),
        image_tokens=anthropic_image_tokens, price_key="anthropic", developer="Anthropic",
        batch=BatchLimits(100_000, 256 * 1024 * 1024,
                          "docs.anthropic.com/en/docs/build-with-claude/batch-processing (read 2026-11-25)"),
        batch_client="evalkit.providers.anthropic.batch:AnthropicBatches", batch_discount=0.5,
        seedless_batch=True, json_output=ANTHROPIC_JSON_OUTPUT),
    ProviderInfo(
        name="google",
        description="Google Gemini API through google-genai (GEMINI_API_KEY or GOOGLE_API_KEY; GEMINI_BASE_URL optional)",
        client="evalkit.providers.google.client:google_provider", wire="gemini",
        key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"), base_url_env="GEMINI_BASE_URL",
        default_url="https://generativelanguage.googleapis.com", sdk=("google.genai", "google"),
        image_limits=GOOGLE_IMAGES, rate_headers="none",
        reasoning=Reasoning("thinking_config.thinking_budget", "budget"), image_tokens=gemini_image_tokens,
        price_key="google", reasoning_in_output=False, developer="Google",
        batch=BatchLimits(10_000, 20 * 1024 * 1024,
                          "ai.google.dev/gemini-api/docs/batch-mode, inline requests (read 2026-11-25)"),
        batch_client="evalkit.providers.google.batch:GoogleBatches", batch_discount=0.5,
        editor="evalkit.providers.google.edit:GoogleImageEditor", image_setting="media_resolution",
        tiers=GEMINI_TIERS),
    # Azure OpenAI, read 2026-11-26 (learn.microsoft.com/azure/ai-foundry/openai/reference and /api-version-
    # lifecycle, /how-to/batch): the classic route takes ?api-version= and the deployment in the path; the
    # v1 API (/openai/v1) takes the deployment as `model`. The key goes in the `api-key` header. Global
    # batch: "50% less cost than global standard", at most 100,000 requests and 200 MB per file.
    ProviderInfo(
        name="azure",
        description="Azure OpenAI chat completions, azure/DEPLOYMENT (AZURE_OPENAI_ENDPOINT or --base-url; "
                    "AZURE_OPENAI_API_KEY, or Microsoft Entra ID: AZURE_OPENAI_AD_TOKEN or evalkit[azure-entra]; "
                    "OPENAI_API_VERSION or --api-version for the classic route, else the v1 API)",
        client="evalkit.providers.azure.client:azure_provider", wire="azure-openai",
        key_env=("AZURE_OPENAI_API_KEY",), key_required=False, base_url_env="AZURE_OPENAI_ENDPOINT",
        image_limits=AZURE_IMAGES, rate_headers="openai", reasoning=OPENAI_REASONING,
        image_tokens=openai_image_tokens, price_key="azure", takes_api_version=True,
        batch=BatchLimits(100_000, 200 * 1024 * 1024,
                          "learn.microsoft.com/azure/ai-foundry/openai/how-to/batch (read 2026-11-26)"),
        batch_client="evalkit.providers.azure.batch:AzureBatches", batch_discount=0.5, image_setting="detail",
        tiers=AZURE_TIERS, responses=True, responses_only=RESPONSES_ONLY, responses_timeout=RESPONSES_TIMEOUT_S),
    # OpenRouter, read 2026-11-26 (openrouter.ai/docs/api-reference/overview, /use-cases/usage-accounting,
    # /features/provider-routing, /api-reference/limits, /faq): OpenAI's chat shape at /api/v1, a bearer key,
    # `usage.cost` in credits (1 credit = 1 USD) on every reply, `provider` routing preferences in the body,
    # 402 when the credits are spent; "OpenRouter passes through the pricing of the underlying providers".
    ProviderInfo(
        name="openrouter",
        description="OpenRouter, openrouter/VENDOR/MODEL (OPENROUTER_API_KEY; OPENROUTER_BASE_URL optional; "
                    "--provider-routing JSON); the cost each reply reports is recorded as its cost",
        client="evalkit.providers.openrouter:openrouter_provider", wire="chat-completions",
        key_env=("OPENROUTER_API_KEY",), base_url_env="OPENROUTER_BASE_URL",
        default_url="https://openrouter.ai/api/v1", image_limits=ROUTED_IMAGES, rate_headers="openrouter",
        reasoning=Reasoning("reasoning.effort or reasoning.max_tokens", "router"),
        image_tokens=openai_image_tokens, price_key="openrouter",
        reports_cost=True, routes_vendors=True, key_check="/key", image_setting="detail", tiers=OPENROUTER_TIERS),
    # Vertex AI, read 2026-11-27 (docs.claude.com/en/docs/build-with-claude/claude-on-vertex-ai; google-genai
    # 3.6 and anthropic 2.14's Vertex clients): an OAuth token from application-default credentials, the
    # project and location in the path; Gemini through generateContent, Claude through rawPredict.
    ProviderInfo(
        name="vertex",
        description="Google Cloud Vertex AI: Gemini (vertex/gemini-…) and Claude (vertex/claude-…) "
                    "(GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION, application-default credentials: "
                    "GOOGLE_APPLICATION_CREDENTIALS or gcloud; GOOGLE_VERTEX_BASE_URL optional; evalkit[vertex])",
        client="evalkit.providers.vertex.client:vertex_provider", wire="vertex-ai",
        key_env=("GOOGLE_APPLICATION_CREDENTIALS",), key_required=False, base_url_env="GOOGLE_VERTEX_BASE_URL",
        default_url="https://aiplatform.googleapis.com", sdk=("google.auth", "vertex"),
        image_limits=VERTEX_IMAGES, rate_headers="none",
        reasoning=Reasoning("thinking_config.thinking_budget (Gemini); thinking.budget_tokens (Claude)", "budget"),
        #                   (the rules of the vendor whose model it is: model_vendor)
        image_tokens=gemini_image_tokens, price_key="vertex", reasoning_in_output=False,
        model_vendor=vertex_vendor, locate="evalkit.providers.vertex.auth:locate",
        image_setting="media_resolution",  # Gemini's (a Claude model: Anthropic's record, which has none)
        tiers=VERTEX_TIERS),
    # Amazon Bedrock, read 2026-11-27 (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
    # /userguide/inference-profiles-support.html; anthropic 2.14's Bedrock client): requests signed with SigV4
    # (service bedrock) from the AWS credential chain, or a Bedrock API key as a bearer token; Claude on its
    # invoke route, every other model through Converse. Bedrock runtime has no free metadata call: no probe,
    # the first request confirms the model (evalkit.ask.confirm).
    ProviderInfo(
        name="bedrock",
        description="Amazon Bedrock, bedrock/MODEL_ID: Claude or, through Converse, Nova, Llama, Pixtral "
                    "(AWS_REGION; the AWS credential chain: AWS_ACCESS_KEY_ID, AWS_PROFILE, …, or "
                    "AWS_BEARER_TOKEN_BEDROCK; AWS_ENDPOINT_URL_BEDROCK_RUNTIME optional; evalkit[bedrock])",
        client="evalkit.providers.bedrock.client:bedrock_provider", wire="bedrock-runtime",
        key_env=("AWS_BEARER_TOKEN_BEDROCK",), key_required=False, base_url_env="AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
        default_url="https://bedrock-runtime.{AWS_REGION}.amazonaws.com", sdk=("botocore", "bedrock"),
        image_limits=BEDROCK_IMAGES, rate_headers="none",
        reasoning=Reasoning("thinking.budget_tokens (Claude); additionalModelRequestFields.reasoningConfig "
                            "(Amazon Nova)", "converse",  # Claude's ids: Anthropic's rules (model_vendor)
                            no_budget="goes through Converse, which takes --reasoning-effort (Amazon Nova's "
                                      "reasoningConfig); a budget is for Claude's ids (…anthropic.…)"),
        image_tokens=anthropic_image_tokens, price_key="bedrock",
        model_vendor=bedrock_vendor, locate="evalkit.providers.bedrock.client:locate", tiers=BEDROCK_TIERS,
        json_output=BEDROCK_JSON_OUTPUT),
)}


def find(name: str) -> ProviderInfo | None:
    """The record of provider `name`, or None."""
    return RECORDS.get(name)


def info(name: str) -> ProviderInfo:
    """The record of provider `name`; an unknown name is one line naming the known ones."""
    record = RECORDS.get(name)
    if record is None:
        raise EvalkitError(f"unknown provider '{name}' (known: {', '.join(RECORDS)})")
    return record


def tiers_of(provider: str) -> ServiceTiers | None:
    """The service tiers `provider` sells and how its wire names them (None: none, or no such provider)."""
    record = RECORDS.get(provider)
    return record.tiers if record is not None else None


def batch_providers() -> tuple[str, ...]:
    """The providers with a batch API (`--batch`)."""
    return tuple(r.name for r in RECORDS.values() if r.batch is not None)


def batch_limits(provider: str) -> BatchLimits:
    """The documented limits of the provider's batch API (its record says it has one)."""
    limits = info(provider).batch
    if limits is None:
        raise EvalkitError(f"{provider}/ has no batch API")
    return limits


def price_key(provider: str) -> str:
    """Where the provider's models are in the price table (its own name when it has no record)."""
    record = RECORDS.get(provider)
    return record.price_key if record is not None else provider


def limits_for(provider: str, model: str = "") -> ImageLimits | None:
    """The provider's image limits; None for a provider without a record (no limits applied). A router's
    VENDOR/MODEL gets the vendor's limits where evalkit knows the vendor."""
    record = RECORDS.get(provider)
    if record is None:
        return None
    vendor = vendor_of(provider, model)
    return RECORDS[vendor].image_limits if vendor is not None else record.image_limits


def vendor_of(provider: str, model: str) -> str | None:
    """The provider evalkit knows that serves a router's VENDOR/MODEL (openrouter/anthropic/… -> anthropic)."""
    record = RECORDS.get(provider)
    if record is not None and record.model_vendor is not None:
        return record.model_vendor(model)
    vendor = model.partition("/")[0] if record is not None and record.routes_vendors and "/" in model else None
    return vendor if vendor in RECORDS and not RECORDS[vendor].routes_vendors else None


def is_claude(provider: str, model: str) -> bool:
    """A model of Anthropic's on a cloud that serves several vendors' (its record's model_vendor): Bedrock's
    `anthropic.…` ids and inference profiles, Vertex AI's `claude-…` names. Their clients ask it as Claude."""
    record = RECORDS.get(provider)
    return record is not None and record.model_vendor is not None and record.model_vendor(model) == "anthropic"



def takes_json_output(provider: str, model: str) -> bool:
    """A Claude model that takes Anthropic's structured outputs (`output_config.format`) where it is asked: its
    provider's record's `json_output` pattern matches the name."""
    record = RECORDS.get(provider)
    return record is not None and bool(record.json_output) and re.match(record.json_output, model) is not None
