"""Service tiers (issue 45, item 1): what a provider's record says about the tiers it sells, and the rules
every provider shares for naming one in a request and reading the one served from a reply.

A tier is a *delivery* setting like `--batch`: the same model gives the same answers at every tier, so the
tier is in neither the run identity nor the cache key (it travels beside the request, on
`GenParams.service_tier`, which `GenParams.to_dict` leaves out). What changes is the price and the latency,
so the tier a reply says it was served at is recorded per answer (`Response.served_tier`,
`Record.served_tier`) and the answer is priced at it (money/pricing.py: `Price.at_tier`).

evalkit's own names are `standard`, `flex` and `priority`; a record maps them to its wire spellings. Light on
import (stdlib only): the record module imports this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalkit.core.errors import EvalkitError
from evalkit.core.tiers import STANDARD


@dataclass(frozen=True)
class ServiceTiers:
    """The tiers one provider sells and how its wire names them. Said in the record, so nothing else tests a
    provider's name: a tier the record does not list is refused before anything is sent (tier_problem).

    `request` and `reply` say where the tier is on the wire, as `"body:FIELD"` (a dotted path in the JSON
    body, e.g. `body:serviceTier.type`) or `"header:NAME"`; a client reads them to build its request and to
    find the tier in the reply. `spelling` maps evalkit's names to the request's values (a tier missing from
    it is sent as nothing: the provider's default, which is standard); `reported` maps the reply's values back
    (a value not in it is recorded as the reply spelled it, and priced at standard).
    """

    sells: tuple[str, ...]  # the tiers besides standard it sells (evalkit's names)
    request: str  # where a request names the tier: "body:service_tier", "header:x-…"
    reply: str  # where the reply says the tier served: "body:service_tier", "header:x-gemini-service-tier"
    spelling: tuple[tuple[str, str], ...]  # evalkit's name -> the request's value
    reported: tuple[tuple[str, str], ...]  # the reply's value -> evalkit's name
    price_share: tuple[tuple[str, float], ...] = ()  # tier -> share of the standard price (flex 0.5: half)
    batch_priced: tuple[str, ...] = ()  # tiers billed at the batch price (OpenAI's flex: "Batch API rates")
    sources: tuple[str, ...] = ()  # the docs read
    read_on: str = ""  # the date they were read
    note: str = ""  # what the docs leave open, or what evalkit chose (shown in docs/providers.md)

    def wire_value(self, tier: str | None) -> str | None:
        """The value a request carries for `tier` (None: send nothing, the provider's default)."""
        if tier is None:
            return None
        return dict(self.spelling).get(tier)

    def served(self, value: object) -> str | None:
        """evalkit's name of the tier a reply reported (`value` as found where `reply` says); None when the
        reply said nothing."""
        if not isinstance(value, str) or not value:
            return None
        return dict(self.reported).get(value, value)

    def share(self, tier: str) -> float | None:
        """The tier's price as a share of the standard price (None: not known from the record)."""
        return dict(self.price_share).get(tier)

    def where(self, side: str) -> tuple[str, str]:
        """`("body", "service_tier")` or `("header", "x-…")` for side "request" or "reply"."""
        kind, _, name = (self.request if side == "request" else self.reply).partition(":")
        return kind, name

    def body_fields(self, tier: str | None) -> dict[str, Any]:
        """What a request body carries for `tier` (`body:a.b` -> {"a": {"b": value}}); {} for nothing."""
        value = self.wire_value(tier)
        kind, name = self.where("request")
        if value is None or kind != "body":
            return {}
        out: Any = value
        for part in reversed(name.split(".")):
            out = {part: out}
        return out

    def headers(self, tier: str | None) -> dict[str, str]:
        """The request headers naming `tier` ({} for nothing)."""
        value = self.wire_value(tier)
        kind, name = self.where("request")
        return {name: value} if value is not None and kind == "header" else {}

    def reply_value(self, body: Any, headers: Mapping[str, str] | None) -> str | None:
        """evalkit's name of the tier the reply reports where `reply` says (a dotted body path, or a header
        read case-insensitively); None when it says nothing."""
        kind, name = self.where("reply")
        if kind == "header":
            found = next((v for k, v in (headers or {}).items() if k.lower() == name.lower()), None)
            return self.served(found)
        value = body
        for part in name.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return self.served(value)


def served_tier(tiers: ServiceTiers | None, asked: str | None, body: Any,
                headers: Mapping[str, str] | None) -> str | None:
    """Response.served_tier for a reply: the tier it reports; a request that asked for none keeps None when
    the reply reports standard (OpenAI says "default" on every reply: the records of a run without
    --service-tier stay as they were), but a reply naming another tier is recorded (and priced) as it is."""
    if tiers is None:
        return None
    served = tiers.reply_value(body, headers)
    return None if asked is None and served == STANDARD else served


def tier_problem(provider: str, tiers: ServiceTiers | None, tier: str | None) -> str | None:
    """Why `--service-tier TIER` cannot go to `provider` (one line naming the flag), or None. Standard goes
    everywhere (it is what a request without a tier gets); a name outside core.tiers.TIERS never gets here (the
    settings refuse it: core.tiers.settings_problem)."""
    if tier is None or tier == STANDARD:
        return None
    if tiers is None:
        return f"--service-tier {tier}: {provider}/ sells no service tiers (leave the flag out)"
    if tier not in tiers.sells:
        return (f"--service-tier {tier}: {provider}/ sells {', '.join(tiers.sells) or 'no tier'} "
                "besides standard")
    return None


def check_tier(provider: str, tiers: ServiceTiers | None, tier: str | None) -> None:
    """tier_problem as an EvalkitError (exit 2, before anything is sent)."""
    problem = tier_problem(provider, tiers, tier)
    if problem is not None:
        raise EvalkitError(problem)


# ---------------------------------------------------------------- the records' tiers (read 2026-11-29)

_OPENAI_SPELLING = (("standard", "default"), ("flex", "flex"), ("priority", "priority"))
_OPENAI_REPORTED = (("default", "standard"), ("auto", "standard"), ("flex", "flex"), ("priority", "priority"),
                    ("scale", "scale"))

#: OpenAI: "set the service_tier parameter to flex"; "Tokens are priced at Batch API rates"; "occasional
#: resource unavailability" (429); the SDK's timeout raised "to 15 minutes". Priority processing is priced per
#: model (money/pricing.py holds the verified rows; another model's priority price is unknown). The reply's
#: `service_tier` names the tier that served it ("default" for standard).
OPENAI_TIERS = ServiceTiers(
    sells=("flex", "priority"), request="body:service_tier", reply="body:service_tier",
    spelling=_OPENAI_SPELLING, reported=_OPENAI_REPORTED, batch_priced=("flex",),
    sources=("https://developers.openai.com/api/docs/guides/flex-processing",
             "https://developers.openai.com/api/docs/guides/priority-processing",
             "https://developers.openai.com/api/docs/pricing"),
    read_on="2026-11-29",
    note="flex: beta, limited models; priority: per-model prices (unknown ones are not guessed)")

#: Azure OpenAI: "Flex processing (preview) provides inference at a 50% discount compared with Standard
#: processing"; "An unsupported model returns an HTTP 400 invalid_request_error and doesn't fall back to
#: Standard processing"; Global Standard deployments only.
AZURE_TIERS = ServiceTiers(
    sells=("flex",), request="body:service_tier", reply="body:service_tier",
    spelling=_OPENAI_SPELLING, reported=_OPENAI_REPORTED, price_share=(("flex", 0.5),),
    sources=("https://learn.microsoft.com/azure/foundry/openai/how-to/flex-processing",),
    read_on="2026-11-29",
    note="flex: preview, Global Standard deployments; a deployment without it answers HTTP 400 (exit 2)")

#: OpenRouter: "Pass service_tier as a top-level parameter ... Supported values are flex ... and priority";
#: "the response will indicate which tier was actually used. Your request is billed at the actual served
#: tier's rate" (which evalkit records as the reply's reported cost).
OPENROUTER_TIERS = ServiceTiers(
    sells=("flex", "priority"), request="body:service_tier", reply="body:service_tier",
    spelling=(("flex", "flex"), ("priority", "priority")), reported=_OPENAI_REPORTED,
    price_share=(("flex", 0.5),),
    sources=("https://openrouter.ai/docs/guides/features/service-tiers",),
    read_on="2026-11-29",
    note="billed at the tier served: the cost each reply reports is the answer's cost")

#: An OpenAI-compatible server or service: the tier is passed through as OpenAI spells it (Groq, for one,
#: sells a flex tier at its on-demand price); a server that does not know it may ignore it. No price share:
#: such servers are priced by --prices.
PASSED_TIERS = ServiceTiers(
    sells=("flex", "priority"), request="body:service_tier", reply="body:service_tier",
    spelling=(("flex", "flex"), ("priority", "priority")), reported=_OPENAI_REPORTED,
    sources=("https://developers.openai.com/api/docs/api-reference/chat/create",
             "https://console.groq.com/docs/flex-processing"),
    read_on="2026-11-29",
    note="passed through as OpenAI spells it; a server that does not know it may ignore it")

#: Gemini API: "specify the service_tier as flex in the request body"; flex "50% discount", "1-15 min target"
#: latency, "best-effort (sheddable)"; priority "75% to 100% more than standard", for Tier 2 and 3 accounts, and
#: a priority request over its limit is served at standard, which only the `x-gemini-service-tier` response
#: header says. google-genai 3.6 sends GenerateContentConfig.service_tier as the body's `serviceTier`
#: (UNSPECIFIED, STANDARD, FLEX, PRIORITY). Priority's price is per model (75-100 % more): not guessed here.
GEMINI_TIERS = ServiceTiers(
    sells=("flex", "priority"), request="body:serviceTier", reply="header:x-gemini-service-tier",
    spelling=(("standard", "standard"), ("flex", "flex"), ("priority", "priority")),
    reported=(("standard", "standard"), ("flex", "flex"), ("priority", "priority")),
    price_share=(("flex", 0.5),),
    sources=("https://ai.google.dev/gemini-api/docs/flex-inference",
             "https://ai.google.dev/gemini-api/docs/priority-inference",
             "https://ai.google.dev/gemini-api/docs/optimization"),
    read_on="2026-11-29",
    note="flex: preview, sheddable (a shed request is a capacity refusal); priority over its limit is served and "
         "priced at standard (the reply header says so); priority's price is per model")

_BEDROCK_SPELLING = (("standard", "default"), ("flex", "flex"), ("priority", "priority"))
_BEDROCK_REPORTED = (("default", "standard"), ("flex", "flex"), ("priority", "priority"), ("reserved", "reserved"))
_BEDROCK_SOURCES = ("https://docs.aws.amazon.com/bedrock/latest/userguide/service-tiers-inference.html",
                    "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ServiceTier.html",
                    "https://aws.amazon.com/bedrock/service-tiers")

#: Amazon Bedrock's Converse API (every model but Claude): the request's `serviceTier: {"type": ...}` (priority |
#: default | flex | reserved), and the reply's `serviceTier` names the tier that served it (botocore's
#: bedrock-runtime model: ConverseRequest/ConverseResponse.serviceTier). "Support varies by model": a model or
#: region without the tier answers ValidationException (400: one line, exit 2). Flex is "discounted", priority
#: "standard rate + premium", per model: no share is guessed (--prices for the rows).
BEDROCK_TIERS = ServiceTiers(
    sells=("flex", "priority"), request="body:serviceTier.type", reply="body:serviceTier.type",
    spelling=_BEDROCK_SPELLING, reported=_BEDROCK_REPORTED, sources=_BEDROCK_SOURCES, read_on="2026-11-29",
    note="Converse: serviceTier.type in the body and the reply; Claude's InvokeModel: the "
         "X-Amzn-Bedrock-Service-Tier header both ways; per-model support and prices (not guessed)")

#: Claude on Bedrock goes through InvokeModel (the anthropic SDK's Bedrock client): the same tiers, named in the
#: `X-Amzn-Bedrock-Service-Tier` request header, and the tier served in the reply's header of the same name
#: (botocore's InvokeModelRequest/InvokeModelResponse.serviceTier, location header). The wire of BEDROCK_TIERS'
#: second route: the `bedrock` record sells what BEDROCK_TIERS says.
BEDROCK_INVOKE_TIERS = ServiceTiers(
    sells=BEDROCK_TIERS.sells, request="header:X-Amzn-Bedrock-Service-Tier",
    reply="header:X-Amzn-Bedrock-Service-Tier", spelling=_BEDROCK_SPELLING, reported=_BEDROCK_REPORTED,
    sources=_BEDROCK_SOURCES, read_on="2026-11-29", note=BEDROCK_TIERS.note)

#: Gemini on Vertex AI: Flex PayGo ("a 50% discount compared to Standard PayGo", "longer response times and higher
#: throttling") and Priority PayGo ("charged per token usage at a higher rate"), global endpoint, preview models,
#: asked with the `X-Vertex-AI-LLM-Shared-Request-Type: flex|priority` header; the reply's
#: `usageMetadata.trafficType` says which served it (ON_DEMAND, ON_DEMAND_FLEX, ON_DEMAND_PRIORITY,
#: PROVISIONED_THROUGHPUT). Claude on Vertex sells none (its client refuses the flag at its first request).
VERTEX_TIERS = ServiceTiers(
    sells=("flex", "priority"), request="header:X-Vertex-AI-LLM-Shared-Request-Type",
    reply="body:usageMetadata.trafficType",
    spelling=(("flex", "flex"), ("priority", "priority")),
    reported=(("ON_DEMAND", "standard"), ("ON_DEMAND_FLEX", "flex"), ("ON_DEMAND_PRIORITY", "priority"),
              ("PROVISIONED_THROUGHPUT", "provisioned")),
    price_share=(("flex", 0.5),),
    sources=("https://docs.cloud.google.com/vertex-ai/generative-ai/docs/flex-paygo",
             "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/priority-paygo"),
    read_on="2026-11-29",
    note="Gemini only (global endpoint, preview models); priority's price is per model; Claude on Vertex sells "
         "no tier")
