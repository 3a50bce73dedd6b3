"""One reasoning switch for every provider: `--reasoning-effort` and `--thinking-budget`, each mapped to
the field its API speaks (docs/reasoning.md), so users need no provider-specific `--extra`.

- openai/: `reasoning_effort` in the body (platform.openai.com/docs/api-reference/chat, read 2026-11-25:
  gpt-5.1 and later accept "none"; gpt-5 accepts "minimal" as its lowest; o-series models have no way
  to switch reasoning off). A token budget is not an OpenAI concept.
- anthropic/: `thinking: {"type": "enabled", "budget_tokens": N}` (docs.anthropic.com, extended
  thinking: at least 1024 tokens, below `max_tokens`, no temperature but the default).
- google/: `thinking_config.thinking_budget` (ai.google.dev, Gemini thinking; 0 switches it off).
- vllm/, openai-compatible/: `chat_template_kwargs.enable_thinking` (the Qwen3-style chat-template
  switch: on or off, no levels and no budget).

Effort levels become budgets where the API takes a budget (EFFORT_BUDGETS). Which provider takes and
refuses what is its record's `reasoning` (providers.registry.Reasoning): reasoning_problem reads it, and
the run's settings are checked with it before anything is written (check_reasoning, called where the
settings are resolved for a model); the providers refuse the same combinations if handed them directly.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import EvalkitError, ProviderError
from evalkit.core.settings import REASONING_EFFORTS, switch_problem
from evalkit.providers.registry import Reasoning, find

if TYPE_CHECKING:
    from evalkit.core.types import GenParams

EFFORTS = REASONING_EFFORTS
EFFORT_BUDGETS = {"none": 0, "low": 1024, "medium": 4096, "high": 16384}
_GPT5_BEFORE_51 = re.compile(r"^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$")  # lowest effort is "minimal"


def rules_of(provider: str, model: str) -> Reasoning | None:
    """The reasoning rules a model is asked under: its provider's record's, or, on a cloud serving several
    vendors' models (model_vendor), that vendor's (Claude on Bedrock or Vertex AI is Anthropic's); None for
    a provider without a record (refused elsewhere)."""
    record = find(provider)
    if record is None:
        return None
    vendor = find(record.model_vendor(model) or "") if record.model_vendor is not None else None
    return (vendor or record).reasoning


def reasoning_problem(provider: str, model: str, effort: str | None, budget: int | None) -> str | None:
    """Why `--reasoning-effort` / `--thinking-budget` cannot go to PROVIDER/MODEL (one line naming the flag
    and the provider), or None: as the record says, so a flag is refused or sent, never dropped."""
    problem = switch_problem(effort, budget)
    rules = rules_of(provider, model)
    if problem is not None or rules is None:
        return problem
    record = find(provider)
    label = f"{provider}/{model if record is not None and record.model_vendor is not None else ''}"
    if budget is not None and not rules.takes_budget():
        return f"--thinking-budget: {label} {rules.no_budget}"
    if budget is not None and 0 < budget < rules.min_budget:
        return f"--thinking-budget: {label} needs at least {rules.min_budget} tokens (0 for no thinking), not {budget}"
    if effort == "none" and rules.always_on and re.match(rules.always_on, model):
        return f"--reasoning-effort none: {provider}/{model} cannot switch reasoning off (its lowest is low)"
    return None


def check_reasoning(model: str, effort: str | None, budget: int | None) -> None:
    """Refuse, as one line, a reasoning switch PROVIDER/MODEL's record refuses (before anything is written)."""
    provider, _, name = model.partition("/")
    problem = reasoning_problem(provider, name, effort, budget)
    if problem is not None:
        raise EvalkitError(problem)


def budget_of(params: GenParams) -> int | None:
    """The thinking budget asked for: the flag's, or the effort level's (none = 0); None if neither."""
    if params.thinking_budget is not None:
        return int(params.thinking_budget)
    if params.reasoning_effort is not None:
        return EFFORT_BUDGETS[params.reasoning_effort]
    return None


def openai_effort(model: str, effort: str) -> str:
    """The level sent: "none" becomes "minimal" on gpt-5 models before 5.1, which do not accept "none"."""
    return "minimal" if effort == "none" and _GPT5_BEFORE_51.match(model) else effort


def chat_fields(provider: str, model: str, params: GenParams) -> dict[str, Any]:
    """Body fields for the chat-completions providers (empty without the reasoning settings)."""
    message = reasoning_problem(provider, model, params.reasoning_effort, params.thinking_budget)
    if message is not None:
        raise ProviderError("permanent", message)
    effort = params.reasoning_effort
    rules = rules_of(provider, model)
    sends = rules.sends if rules is not None else "chat-template"
    if sends == "router":  # a router's one field for every vendor
        return router_reasoning(effort, params.thinking_budget)
    if sends not in ("effort", "chat-template"):
        raise ProviderError("permanent", f"{provider}/: its record's reasoning switch {sends!r} is not one a "
                                         "chat completions request carries")
    if effort is None:
        return {}
    if sends == "effort":  # the OpenAI API's levels
        return {"reasoning_effort": openai_effort(model, effort)}
    return {"chat_template_kwargs": {"enable_thinking": effort != "none"}}


def router_reasoning(effort: str | None, budget: int | None) -> dict[str, Any]:
    """OpenRouter's `reasoning` object (openrouter.ai/docs/use-cases/reasoning-tokens, read 2026-11-26): an
    effort level or a token budget, which it translates for the vendor; none/0 switches reasoning off."""
    if effort is None and budget is None:
        return {}
    if effort == "none" or budget == 0:
        return {"reasoning": {"enabled": False}}
    return {"reasoning": {"effort": effort} if effort is not None else {"max_tokens": int(budget or 0)}}
