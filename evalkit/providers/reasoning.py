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

Effort levels become budgets where the API takes a budget (EFFORT_BUDGETS). Which provider refuses
what is decided in the settings layer (core.settings.reasoning_problem), before anything is written;
the providers refuse the same combinations if handed them directly.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from evalkit.core.errors import ProviderError
from evalkit.core.settings import REASONING_EFFORTS, reasoning_problem
from evalkit.providers.registry import find

if TYPE_CHECKING:
    from evalkit.core.types import GenParams

EFFORTS = REASONING_EFFORTS
EFFORT_BUDGETS = {"none": 0, "low": 1024, "medium": 4096, "high": 16384}
_GPT5_BEFORE_51 = re.compile(r"^gpt-5(-mini|-nano)?(-\d{4}-\d{2}-\d{2})?$")  # lowest effort is "minimal"


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
    record = find(provider)
    if record is not None and record.reasoning == "reasoning.effort":  # a router's one field for every vendor
        return router_reasoning(effort, params.thinking_budget)
    if effort is None:
        return {}
    if record is not None and record.reasoning == "reasoning_effort":  # the OpenAI API's levels (its record's field)
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


def anthropic_thinking(params: GenParams) -> tuple[dict[str, Any] | None, int]:
    """(the `thinking` parameter or None, the max_tokens to send). max_tokens must exceed the budget:
    when it does not, it is raised to budget + max_tokens so the answer keeps its own room."""
    message = reasoning_problem("anthropic", "", params.reasoning_effort, params.thinking_budget)
    if message is not None:
        raise ProviderError("permanent", message)
    budget = budget_of(params)
    if not budget:
        return None, params.max_tokens
    max_tokens = params.max_tokens if params.max_tokens > budget else budget + params.max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens
