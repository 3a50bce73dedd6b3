"""Money: what a run spent (from reported usage), what its answers are worth at list price, what it would
spend (dry run), and the budget.

Spent cost counts only responses that were paid for (not cache hits): `cost_usd`, 0.3's meaning. The list
cost prices every answer, cached or not, at the list price of the delivery that served it (live, batch), so
a run answered from the cache does not say the model costs nothing. Unknown prices give None, never a
guess; `--max-cost` therefore needs a known price.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from evalkit.ask.rate_limiter import estimate_tokens
from evalkit.core.errors import EvalkitError
from evalkit.core.record import Record
from evalkit.core.types import ImageRef, Outcome, Query, Usage
from evalkit.money.pricing import Price, cost_usd, estimate_cost, price_of
from evalkit.providers.image_setting import setting_of
from evalkit.providers.registry import find, openai_image_tokens

if TYPE_CHECKING:  # types only: what prices a run reads no runner's module
    from evalkit.ask.runner import Runner
    from evalkit.images.pipeline import ImagePipeline

SHORT_ANSWER_TOKENS = 16  # the low end of a dry run's output estimate: a letter and a few words


def image_tokens(provider: str, width: int, height: int, model: str = "", setting: str | None = None) -> int:
    """The provider's documented image-token formula (its record's; OpenAI's for a provider without one,
    approximate for OpenAI-compatible servers), for the model's family and the resolution setting sent."""
    record = find(provider)
    return (record.image_tokens if record is not None else openai_image_tokens)(width, height, model, setting)


@dataclass
class CostMeter:
    """Running spend of this invocation, for `--max-cost` and the summary."""

    price: Price | None
    spent_usd: float = 0.0

    def add(self, outcome: Outcome) -> None:
        if outcome.cached or not outcome.response.ok:
            return
        r = outcome.response
        self.spent_usd += cost_usd(price_of(self.price, r.via, r.served_tier), r.usage) or 0.0


def input_tokens(provider: str, query: Query, sizes: Sequence[tuple[int, int]], model: str = "") -> int:
    """Estimated input tokens: the text's (estimate_tokens without its output and image allowances) and each
    image's by the provider's formula for the model and the query's resolution setting, from its (width,
    height) as sent."""
    text = estimate_tokens(query) - query.params.max_tokens - 800 * len(query.image_parts())
    setting = setting_of(query.params.detail, query.params.media_resolution)
    return text + sum(image_tokens(provider, w, h, model, setting) for w, h in sizes)


def request_estimate(price: Price | None, provider: str, query: Query,
                     sizes: Sequence[tuple[int, int]], model: str = "") -> float | None:
    """What one request may cost: its input and all of max_tokens as output, at the price (None: no price).
    An upper bound but for the input estimate: `--max-cost` reserves it before the request is sent."""
    return estimate_cost(price, input_tokens(provider, query, sizes, model), query.params.max_tokens)


def record_cost(price: Price | None, record: Record) -> float | None:
    """What one answer cost when it was asked: nothing from the cache or for a failure; what the provider
    reported where it did (OpenRouter); else from the price; None: no price."""
    if record.cached or record.error is not None:
        return 0.0 if price is not None or reported(record) else None
    return cost_usd(price_of(price, record.via, record.served_tier), Usage.from_dict(record.usage))


def reported(record: Record) -> bool:
    return record.usage.get("cost_usd") is not None


def records_cost(price: Price | None, records: Iterable[Record]) -> float | None:
    """What the answers in a run directory cost when they were asked (cache hits cost nothing); None when
    neither a price nor a reported cost is known."""
    records = list(records)
    if price is None and not any(reported(r) for r in records):
        return None
    return sum((record_cost(price, r) or 0.0 for r in records), 0.0)


def list_cost(price: Price | None, record: Record) -> float | None:
    """What one answer costs at the list price of the delivery that served it (its `via`: live, batch),
    whether this run paid for it or the cache served it (the answer keeps its usage and delivery); a
    failure costs nothing; None: no price (and the provider reported none)."""
    if record.error is not None:
        return 0.0 if price is not None or reported(record) else None
    return cost_usd(price_of(price, record.via, record.served_tier), Usage.from_dict(record.usage))


def records_list_cost(price: Price | None, records: Iterable[Record]) -> float | None:
    """Every answer's list cost (cache hits included); None when neither a price nor a reported cost is known."""
    records = list(records)
    if price is None and not any(reported(r) for r in records):
        return None
    return sum((list_cost(price, r) or 0.0 for r in records), 0.0)


def list_fields(price: Price | None, records: Sequence[Record]) -> dict[str, float | None]:
    """summary.json usage's `list_cost_usd`, and beside it `list_cost_standard_usd` (every answer at the
    standard, live price) where some answer came by another delivery (batch, a service tier) and the two
    differ."""
    out = {"list_cost_usd": records_list_cost(price, records)}
    if any(r.via or r.served_tier for r in records):
        standard = records_list_cost(price, [replace(r, via=None, served_tier=None) for r in records])
        if standard != out["list_cost_usd"]:
            out["list_cost_standard_usd"] = standard
    return out


def cost_fields(price: Price | None, records: Sequence[Record]) -> dict[str, float | None]:
    """summary.json usage's money: `cost_usd` (what the answers cost when they were asked, cache hits
    nothing: 0.3's meaning, so summaries of both compare), `cost_live_usd` where a batch answered (the same
    answers asked live), then the list cost (list_fields)."""
    out = {"cost_usd": records_cost(price, records)}
    if any(r.via == "batch" for r in records):
        out["cost_live_usd"] = records_cost(price, [replace(r, via=None) for r in records])
    return {**out, **list_fields(price, records)}


def paid_now(price: Price | None, fresh: Iterable[Record]) -> float | None:
    """summary.json's `this_run.cost_usd`: what this invocation's requests cost (its answers not from the
    cache); 0 when it sent none that answered; None: it did, and no price is known."""
    sent = [r for r in fresh if not r.cached]
    return records_cost(price, sent) if any(r.error is None for r in sent) else 0.0


@dataclass
class DryRunPlan:
    n_queries: int
    cached: int
    to_send: int
    input_tokens: int
    output_tokens_low: int
    output_tokens_high: int
    cost_low_usd: float | None
    cost_high_usd: float | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def plan_dry_run(queries: Sequence[Query], runner: Runner, price: Price | None) -> DryRunPlan:
    """Count what is cached and estimate tokens and cost of the rest, sending nothing."""
    sizes: dict[ImageRef, tuple[int, int]] = {}
    provider, model = runner.provider.spec.provider, runner.provider.spec.model
    cached = n_input = low = high = 0
    for q in queries:
        if runner.cache.get(runner.key_of(q)) is not None:
            cached += 1
            continue
        for part in q.image_parts():
            if part.ref not in sizes:
                sizes[part.ref] = _size(runner.pipeline, part.ref)
        n_input += input_tokens(provider, q, [sizes[part.ref] for part in q.image_parts()], model)
        low += min(SHORT_ANSWER_TOKENS, q.params.max_tokens)
        high += q.params.max_tokens
    notes = [] if price is not None else ["no price known for this model: cost not estimated"]
    return DryRunPlan(len(queries), cached, len(queries) - cached, n_input, low, high,
                      estimate_cost(price, n_input, low), estimate_cost(price, n_input, high), notes)


def _size(pipeline: ImagePipeline, ref: ImageRef) -> tuple[int, int]:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(pipeline.source_bytes(ref))) as img:
            return img.size
    except OSError as e:
        raise EvalkitError(f"cannot read image {ref.describe()}: {e}") from e
