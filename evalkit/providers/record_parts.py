"""The parts the provider records are built from that are not one provider's facts: the reasoning switch
(what `--reasoning-effort` / `--thinking-budget` become on a wire; providers/reasoning.py applies it) and
whose model a name on a several-vendor cloud is. Kept apart so registry.py stays the records themselves.
Stdlib only: the record module imports this.
"""

from __future__ import annotations

import re
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


def vertex_vendor(model: str) -> str:
    """Whose model a `vertex/` name is: Claude is Anthropic's, every other name is asked as Gemini."""
    return "anthropic" if model.startswith("claude-") else "google"


_BEDROCK_CLAUDE = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")  # an inference profile's geography, then the vendor


def bedrock_vendor(model: str) -> str | None:
    """Whose model a `bedrock/` id is: Claude's (`anthropic.…`, `us.anthropic.…`) is Anthropic's; other ids are
    asked through Converse, under Bedrock's own limits."""
    return "anthropic" if _BEDROCK_CLAUDE.match(model) else None
