"""Usage -> US dollars, from a dated price table that a user file can override or extend.

Why a table in code and not a guess: a cost figure in summary.json is only useful if it can be
traced to a published price on a given day, so every built-in price carries its source URL and
the date it was read. A model that is not in the table (or that only *looks* like one in it,
such as "gpt-5-nano" next to "gpt-5") has no price, and its cost is None, never an estimate.

Accounting rules (all prices in USD per million tokens):
- `Usage.input_tokens` INCLUDES cached input tokens (OpenAI `prompt_tokens`, Gemini
  `prompt_token_count`, and evalkit's Anthropic adapter all count them in). Cached tokens are
  billed at the cached rate and the rest at the input rate. Where a cached rate could not be
  verified it is None and cached tokens are billed at the full input rate (an upper bound).
- Reasoning tokens are billed as output by every provider here. OpenAI's `completion_tokens`
  and Anthropic's `output_tokens` already include them; Gemini's `candidates_token_count` does
  NOT include `thoughts_token_count`, so evalkit's Google adapters report thoughts separately in
  `Usage.reasoning_tokens` and they are added to output. Each provider's record
  (evalkit.providers.registry, reasoning_in_output) states this; `cost_usd(..., reasoning_in_output=...)` makes it explicit at the call site.
- Not modelled (said here so nobody assumes otherwise): Gemini 2.5 Pro's and Claude Sonnet 4.x's
  higher rates for prompts above 200k tokens (evaluation prompts are far below that); Anthropic
  cache *writes* (1.25x input; evalkit's Anthropic adapter counts them as plain input, so a run
  with prompt caching is under-estimated by 0.25x input on written tokens).
- Batch answers (`--batch`) are billed at the batch price: a price's own batch rates when it has
  them, else the provider's documented batch discount on every rate (its record's batch_discount).
- Service tiers (`--service-tier`, issue 45): an answer is billed at the tier its reply says served it
  (`Price.at_tier`): a price's own rates for that tier where the table or a `--prices` file has them (OpenAI's priority
  prices, per model), else the batch price for a tier the provider bills at batch rates (OpenAI's flex),
  else the tier's documented share of the standard price (its record's `tiers.price_share`); none of
  these: no price (None), never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from evalkit.core.tiers import STANDARD
from evalkit.core.types import Usage
from evalkit.money.price_file import read_price_file
from evalkit.providers.registry import find, price_key, tiers_of, vendor_of

# A name followed by one of these is a snapshot of the same model (same price); anything else
# ("-mini", "-nano", "-pro", "-audio-preview", "-lite", "-5" in "claude-opus-4-5") is a
# different model that may cost something else entirely, so it does not match.
_SNAPSHOT = re.compile(r"(?:-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{3}|-latest|@\d{8})")


@dataclass(frozen=True)
class Price:
    """USD per million tokens for one model, with where and when the figure was read."""

    input_per_m: float
    output_per_m: float
    cached_input_per_m: float | None
    source: str
    read_on: str
    provider: str = ""
    note: str = ""
    batch_input_per_m: float | None = None  # None: the provider's batch discount on input_per_m
    batch_output_per_m: float | None = None
    tier_rates: tuple[tuple[str, float, float | None, float], ...] = ()  # (tier, input, cached input, output)

    def at_tier(self, tier: str | None) -> Price | None:
        """The price of an answer served at `tier` (None or standard: this price); None: not known."""
        if tier is None or tier == STANDARD:
            return self
        own = next((row for row in self.tier_rates if row[0] == tier), None)
        if own is not None:
            return replace(self, input_per_m=own[1], cached_input_per_m=own[2], output_per_m=own[3],
                           note=self._noted(f"{tier} price"))
        tiers = tiers_of(self.provider)
        if tiers is None:
            return None
        if tier in tiers.batch_priced:
            return replace(self.batch(), note=self._noted(f"{tier} price (batch rates)"))
        share = tiers.share(tier)
        if share is None:
            return None
        c = self.cached_input_per_m
        return replace(self, input_per_m=self.input_per_m * share, output_per_m=self.output_per_m * share,
                       cached_input_per_m=None if c is None else c * share,
                       note=self._noted(f"{tier} price ({share:g}x standard)"))

    def batch(self) -> Price:
        """The price of an answer from the provider's batch API."""
        record = find(self.provider)
        share = record.batch_discount if record is not None and record.batch_discount is not None else 0.5
        cached = None if self.cached_input_per_m is None else self.cached_input_per_m * share
        return Price(self.input_per_m * share if self.batch_input_per_m is None else self.batch_input_per_m,
                     self.output_per_m * share if self.batch_output_per_m is None else self.batch_output_per_m,
                     cached, self.source, self.read_on, self.provider, self._noted("batch price"))

    def _noted(self, what: str) -> str:
        """The note of a price derived from this one: this note, then what it is."""
        return (self.note + "; " if self.note else "") + what


def price_of(price: Price | None, via: str | None, tier: str | None = None) -> Price | None:
    """The price an answer was billed at: the batch price for `via == "batch"`, else the price of the service
    tier that served it (`tier`: its record's `served_tier`; None: standard)."""
    if price is None:
        return None
    return price.batch() if via == "batch" else price.at_tier(tier)


# ---------------------------------------------------------------- the built-in table

_OPENAI_SRC = (
    "https://platform.openai.com/docs/pricing (now developers.openai.com/api/docs/pricing); the page "
    "itself is not in the search index, so each figure was cross-checked in at least two copies that "
    "cite it: chatgptpricing-akr.pages.dev/api-pricing, calcis.dev/models/o3 (verified 2026-04-06), "
    "hex.pm openai_responses pricing.ex (official page of 2025-06-03), gitcode akushonkamen/oG-Memory "
    "rate_cards.yaml, github/docs copilot models-and-pricing.yml"
)
_ANTHROPIC_SRC = "https://platform.claude.com/docs/en/about-claude/pricing"
_GOOGLE_SRC = (
    "https://ai.google.dev/gemini-api/docs/pricing (Paid tier, text/image/video input, prompts <= 200k); "
    "the page itself is not in the search index; cross-checked in deploybase.ai/articles/gemini-api-pricing "
    "(citing the official page), discuss.ai.google.dev/t/107349 (2.5 Pro cache price), "
    "hivebook.wiki Gemini 2.5, aifreeapi.com gemini-api-pricing-2026"
)
_READ_ON = "2026-11-22"
# Amazon Bedrock, read 2026-11-27: aws.amazon.com/bedrock/pricing itself is not in the search index; Claude
# on Bedrock at Anthropic's rates (platform.claude.com/docs/en/about-claude/pricing, the model ids of
# platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock), Amazon Nova, Llama and Pixtral
# (us-east-1, on-demand) cross-checked in copies citing the page (tokenmix.ai/blog/aws-bedrock-pricing,
# swfte.com amazon-nova-pro-pricing, metaltoad.com aws-bedrock-pricing). Cross-region (geographic)
# inference profiles: "no additional charge ... calculated basis the region you made the request in";
# Claude 4.5 and later: global profiles "approximately 10% savings ... compared to geographic"
# (docs.aws.amazon.com/bedrock/latest/userguide/global-cross-region-inference.html): the table holds the
# global price, a geographic profile or an in-region call pays 1.1x (bedrock_price).
_BEDROCK_SRC = ("https://aws.amazon.com/bedrock/pricing (via tokenmix.ai/blog/aws-bedrock-pricing, swfte.com "
                "amazon-nova-pro-pricing); Claude at platform.claude.com/docs/en/about-claude/pricing")
_READ_ON_BY = {"bedrock": "2026-11-27", "vertex": "2026-11-27"}
# Vertex AI, read 2026-11-27: cloud.google.com/vertex-ai/generative-ai/pricing itself could not be read from this
# session. Claude on Vertex at Anthropic's rates: "Global endpoints ... no pricing premium" (docs.claude.com
# claude-on-vertex-ai, Global vs regional endpoints); regional endpoints cost more for Sonnet 4.5 and later
# (not modelled: the table holds the global price). Gemini 2.5 at the Gemini API's list prices (the google
# table above), not checked against Vertex's own page; 2.0 models are left out (their Vertex prices may
# differ from the Gemini API's and were not verified). --prices overrides any of them.
_VERTEX_SRC = ("https://cloud.google.com/vertex-ai/generative-ai/pricing (not readable 2026-11-27); Claude at "
               "platform.claude.com/docs/en/about-claude/pricing (global endpoint), Gemini at the Gemini API's prices")
_GEO_PREMIUM = 1.1
_BEDROCK_GEO = re.compile(r"^(us-gov|us|eu|apac|jp|au|ca|global)\.")

# provider -> [(name, input, cached input or None, output, note)]
_TABLE: dict[str, tuple[str, list[tuple[str, float, float | None, float, str]]]] = {
    "openai": (_OPENAI_SRC, [
        ("gpt-4o", 2.50, 1.25, 10.00, ""),
        ("gpt-4o-2024-05-13", 5.00, None, 15.00, "first gpt-4o snapshot, priced higher"),
        ("gpt-4o-mini", 0.15, 0.075, 0.60, ""),
        ("gpt-4.1", 2.00, 0.50, 8.00, ""),
        ("gpt-4.1-mini", 0.40, 0.10, 1.60, ""),
        ("gpt-5", 1.25, 0.125, 10.00, ""),
        ("gpt-5-mini", 0.25, 0.025, 2.00, ""),
        ("o3", 2.00, 0.50, 8.00, "after the June 2025 price cut"),
        ("o4-mini", 1.10, 0.275, 4.40, ""),
        ("o3-pro", 20.00, None, 80.00, "Responses API only; no cached-input rate; cross-checked 2026-11-29 in "
                                        "modelpedia.dev/openai/o3-pro and aiwiki.ai/wiki/o3-pro (launch price)"),
    ]),
    "anthropic": (_ANTHROPIC_SRC, [
        ("claude-opus-4", 15.00, 1.50, 75.00, "retired on the Anthropic API (Google Cloud only)"),
        ("claude-opus-4-0", 15.00, 1.50, 75.00, "alias of claude-opus-4"),
        ("claude-opus-4-1", 15.00, 1.50, 75.00, "retired on the Anthropic API (Bedrock, Google Cloud)"),
        ("claude-opus-4-5", 5.00, 0.50, 25.00, ""),
        ("claude-opus-4-6", 5.00, 0.50, 25.00, ""),
        ("claude-opus-4-7", 5.00, 0.50, 25.00, ""),
        ("claude-opus-4-8", 5.00, 0.50, 25.00, ""),
        ("claude-sonnet-4", 3.00, 0.30, 15.00, "prompts > 200k tokens cost more: not modelled"),
        ("claude-sonnet-4-0", 3.00, 0.30, 15.00, "alias of claude-sonnet-4"),
        ("claude-sonnet-4-5", 3.00, 0.30, 15.00, "prompts > 200k tokens cost more: not modelled"),
        ("claude-sonnet-4-6", 3.00, 0.30, 15.00, ""),
        ("claude-haiku-4-5", 1.00, 0.10, 5.00, ""),
        ("claude-3-5-haiku", 0.80, 0.08, 4.00, ""),
    ]),
    "google": (_GOOGLE_SRC, [
        ("gemini-2.5-pro", 1.25, 0.125, 10.00,
         "prompts <= 200k tokens; the > 200k tier ($2.50 in / $15 out) is ignored"),
        ("gemini-2.5-flash", 0.30, None, 2.50, "cached rate not verified: billed at the input rate"),
        ("gemini-2.5-flash-lite", 0.10, None, 0.40, "cached rate not verified: billed at the input rate"),
        ("gemini-2.0-flash", 0.10, None, 0.40, "cached rate not verified: billed at the input rate"),
    ]),
    "bedrock": (_BEDROCK_SRC, [
        ("anthropic.claude-opus-4-6-v1", 5.00, 0.50, 25.00, "global price (+10% geographic or in-region)"),
        ("anthropic.claude-sonnet-4-6", 3.00, 0.30, 15.00, "global price (+10% geographic or in-region)"),
        ("anthropic.claude-opus-4-5-20251101-v1:0", 5.00, 0.50, 25.00, "global price (+10% geographic or in-region)"),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", 3.00, 0.30, 15.00,
         "global price (+10% geographic or in-region)"),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", 1.00, 0.10, 5.00, "global price (+10% geographic or in-region)"),
        ("anthropic.claude-sonnet-4-20250514-v1:0", 3.00, 0.30, 15.00, ""),
        ("anthropic.claude-opus-4-1-20250805-v1:0", 15.00, 1.50, 75.00, ""),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", 0.80, 0.08, 4.00, ""),
        ("amazon.nova-lite-v1:0", 0.06, 0.015, 0.24, ""),
        ("amazon.nova-pro-v1:0", 0.80, 0.20, 3.20, ""),
        ("meta.llama3-2-11b-instruct-v1:0", 0.16, None, 0.16, "no prompt cache"),
        ("meta.llama3-2-90b-instruct-v1:0", 0.72, None, 0.72, "no prompt cache"),
        ("mistral.pixtral-large-2502-v1:0", 2.00, None, 6.00, "no prompt cache"),
    ]),
    "vertex": (_VERTEX_SRC, [
        ("gemini-2.5-pro", 1.25, None, 10.00, "prompts <= 200k tokens; cached rate not verified"),
        ("gemini-2.5-flash", 0.30, None, 2.50, "cached rate not verified: billed at the input rate"),
        ("gemini-2.5-flash-lite", 0.10, None, 0.40, "cached rate not verified: billed at the input rate"),
        ("claude-opus-4-5", 5.00, 0.50, 25.00, "global endpoint price (regional endpoints cost more)"),
        ("claude-sonnet-4-5", 3.00, 0.30, 15.00, "global endpoint price (regional endpoints cost more)"),
        ("claude-haiku-4-5", 1.00, 0.10, 5.00, "global endpoint price (regional endpoints cost more)"),
        ("claude-opus-4-1", 15.00, 1.50, 75.00, ""),
        ("claude-sonnet-4", 3.00, 0.30, 15.00, ""),
        ("claude-3-5-haiku", 0.80, 0.08, 4.00, ""),
    ]),
}
# Priority processing, per model (input, cached input, output; USD per million tokens), read 2026-11-29 from
# openai.com/api-priority-processing (its price table, "excludes long context": requests estimated above 128K
# prompt tokens are not priced here); every table model has a row there. "Tokens served by Priority processing
# will be billed ... at a premium" and the reply's service_tier names the tier that served the request.
_PRIORITY: dict[str, dict[str, tuple[float, float | None, float]]] = {
    "openai": {
        "gpt-4o": (4.25, 2.125, 17.00),  # the page names the 2024-11-20 and 2024-08-06 snapshots
        "gpt-4o-2024-05-13": (8.75, None, 26.25),
        "gpt-4o-mini": (0.25, 0.125, 1.00),
        "gpt-4.1": (3.50, 0.875, 14.00),
        "gpt-4.1-mini": (0.70, 0.175, 2.80),
        "gpt-5": (2.50, 0.25, 20.00),
        "gpt-5-mini": (0.45, 0.045, 3.60),
        "o3": (3.50, 0.875, 14.00),
        "o4-mini": (2.00, 0.50, 8.00),
    },
}
_PREMIUM_IDS = frozenset(name for name, *_rest, note in _TABLE["bedrock"][1] if note.startswith("global price"))


def _builtin() -> dict[str, dict[str, Price]]:
    out: dict[str, dict[str, Price]] = {}
    for provider, (source, rows) in _TABLE.items():
        read_on = _READ_ON_BY.get(provider, _READ_ON)
        priority = _PRIORITY.get(provider, {})
        out[provider] = {name: Price(i, o, c, source, read_on, provider, note,
                                     tier_rates=(("priority", *priority[name]),) if name in priority else ())
                         for name, i, c, o, note in rows}
    return out


def bedrock_price(table: PriceTable, model: str) -> Price | None:
    """A Bedrock id's price: an inference profile (`us.`, `global.`, …) at its model's, and Claude 4.5 and later
    10% above the global price unless asked through a `global.` profile."""
    geo = _BEDROCK_GEO.match(model)
    base = model[geo.end():] if geo else model
    price = table.lookup("bedrock", model) or table.lookup("bedrock", base)
    if price is None or base not in _PREMIUM_IDS or (geo and geo.group(1) == "global") or price.provider != "bedrock":
        return price
    c = price.cached_input_per_m
    return replace(price, input_per_m=price.input_per_m * _GEO_PREMIUM, output_per_m=price.output_per_m * _GEO_PREMIUM,
                   cached_input_per_m=None if c is None else c * _GEO_PREMIUM,
                   note="geographic or in-region: 1.1x the global price")


# ---------------------------------------------------------------- lookup


@dataclass(frozen=True)
class PriceTable:
    """Prices by provider and model name; see `lookup` for how names match."""

    prices: dict[str, dict[str, Price]] = field(default_factory=dict)

    def lookup(self, provider: str, model: str) -> Price | None:
        """Exact name first, then the longest table name that `model` extends by a snapshot suffix
        (a date, "-latest", "-001"), e.g. gpt-4o-2024-08-06 -> gpt-4o, gpt-4o-mini-2024-07-18 ->
        gpt-4o-mini. Any other suffix is a different model and gets None, not a neighbour's price."""
        by_name = self.prices.get(provider)
        if not by_name:
            return None
        name = model.removeprefix("models/")  # Gemini's resource form
        if name in by_name:
            return by_name[name]
        best = max((k for k in by_name if name.startswith(k) and _SNAPSHOT.fullmatch(name[len(k):])),
                   key=len, default=None)
        return by_name[best] if best is not None else None

    def price_for(self, provider: str, model: str) -> Price | None:
        """The price of PROVIDER/MODEL: under the provider's price-table key (its record's); for a router's
        VENDOR/MODEL without its own entry, the vendor's price ("OpenRouter passes through the pricing of
        the underlying providers", openrouter.ai/docs/faq, read 2026-11-26)."""
        key = price_key(provider)
        found = bedrock_price(self, model) if key == "bedrock" else self.lookup(key, model)
        vendor = vendor_of(provider, model) if found is None else None
        if vendor is None:
            return found
        price = self.lookup(price_key(vendor), model.partition("/")[2])
        return None if price is None else replace(price, note=f"{provider} passes {vendor}'s price through")

    def names(self, provider: str) -> list[str]:
        return sorted(self.prices.get(provider, {}))


def load_prices(user_file: Path | None = None) -> PriceTable:
    """The built-in table, overridden/extended by a user JSON file (evalkit.money.price_file) of the form
    {"openai/gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}; an entry replaces a built-in price
    whole (its tiers with it: a tier it does not price falls back to the provider's record)."""
    prices = _builtin()
    if user_file is not None:
        for (provider, name), entry in read_price_file(Path(user_file)).items():
            prices.setdefault(provider, {})[name] = Price(
                input_per_m=entry.input, output_per_m=entry.output, cached_input_per_m=entry.cached_input,
                batch_input_per_m=entry.batch_input, batch_output_per_m=entry.batch_output, source=entry.source,
                read_on=entry.read_on, provider=provider, note=entry.note, tier_rates=entry.tiers)
    return PriceTable(prices)


# ---------------------------------------------------------------- money


def reasoning_included(provider: str) -> bool:
    """The provider's documented rule (its record's reasoning_in_output); OpenAI's wire format when unknown."""
    record = find(provider)
    return record.reasoning_in_output if record is not None else True


def cost_usd(price: Price | None, usage: Usage, *, reasoning_in_output: bool | None = None) -> float | None:
    """What one usage cost: the cost the provider reported with it, else from the price; None when neither
    is known.

    reasoning_in_output: whether usage.output_tokens already includes usage.reasoning_tokens
    (None: the rule of price.provider, see reasoning_included). When False they are added.
    """
    if usage.cost_usd is not None:  # the provider said what it charged (OpenRouter): that, not an estimate
        return usage.cost_usd
    if price is None:
        return None
    if reasoning_in_output is None:
        reasoning_in_output = reasoning_included(price.provider)
    cached = max(0, min(usage.cached_input_tokens, usage.input_tokens))
    fresh = max(0, usage.input_tokens - cached)
    cached_rate = price.input_per_m if price.cached_input_per_m is None else price.cached_input_per_m
    output = usage.output_tokens + (0 if reasoning_in_output else usage.reasoning_tokens)
    return (fresh * price.input_per_m + cached * cached_rate + output * price.output_per_m) / 1e6


def estimate_cost(price: Price | None, input_tokens: int, output_tokens: int) -> float | None:
    """A dry run's estimate: no cache hits assumed, reasoning counted in output_tokens."""
    if price is None:
        return None
    return (input_tokens * price.input_per_m + output_tokens * price.output_per_m) / 1e6
