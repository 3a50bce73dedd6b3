"""A provider's reasoning switch: what `--reasoning-effort` / `--thinking-budget` become on its wire.

Part of the provider record (registry.py's `ProviderInfo.reasoning`), kept apart so the record module
stays one screenful of facts per provider; providers/reasoning.py applies it. Stdlib only: the record
module imports this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The reasoning switch a provider's requests carry (providers/reasoning.py): "effort" OpenAI's levels,
# "chat-template" a chat template's on/off, "router" an effort or a budget the router translates, "budget"
# thinking tokens, "converse" Bedrock Converse's reasoningConfig (levels).
Switch = Literal["effort", "chat-template", "router", "budget", "converse"]


@dataclass(frozen=True)
class Reasoning:
    """What `--reasoning-effort` / `--thinking-budget` become on a provider's wire, and which it refuses.
    Said in the record, so a new provider cannot drop a flag silently: the run refuses what the record
    refuses, before anything is written (providers/reasoning.py), and sends what it says."""

    field: str  # the wire field, as people read it (docs/reasoning.md)
    sends: Switch  # which switch its requests carry
    no_budget: str = ""  # why --thinking-budget is refused, after "--thinking-budget: PROVIDER/ "; "": taken
    min_budget: int = 0  # the smallest budget above 0 it takes (0 switches thinking off)
    always_on: str = ""  # a pattern of model names that cannot switch reasoning off (their lowest effort is low)

    def takes_budget(self) -> bool:
        """A --thinking-budget goes to it (it gives no reason to refuse one)."""
        return not self.no_budget


NO_BUDGET_SWITCHES = ("effort", "chat-template", "converse")  # switches with no budget: the record says why
OPENAI_REASONING = Reasoning("reasoning_effort", "effort",
                             no_budget="takes no thinking budget; use --reasoning-effort low|medium|high")
TEMPLATE_REASONING = Reasoning("chat_template_kwargs.enable_thinking", "chat-template",
                               no_budget="servers take no thinking budget (chat templates switch thinking on or "
                                         "off); use --reasoning-effort")
ANTHROPIC_MIN_BUDGET = 1024  # docs.anthropic.com, extended thinking: budget_tokens >= 1024
